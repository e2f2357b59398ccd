"""Break-it findings on erasure (OPS-4) and key rotation (OPS-3).

Each test is marked xfail(strict=True): it passes while the weakness is there and
fails once it is fixed (then remove the mark)."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text as sql

from app.extensions import db
from app.models import OperatorUser
from app.secret_box import box_from_texts, new_key_text
from app.services.cases.reports import intake_report
from app.services.secrets_key import RotationRefused, rotate_secrets_key

from .test_ops4_erasure import approved_erasure, holding


@pytest.mark.parametrize("stored, asked", [("User:77001", "user:77001"), ("at://did:plc:abcd", "did:plc:abcd")])
@pytest.mark.xfail(strict=True, reason=(
    "OPS-4: an erasure request matches the subject's own spelling and its canonical form only, "
    "not stored spellings that canonicalise to it (BULK-1's canonical_reference): evidence whose "
    "author is 'User:77001' or 'at://did:plc:abcd' survives an approved erasure of 'user:77001' / "
    "'did:plc:abcd' (content_text, queue preview and search text), and the request says zero rows"))
def test_ops4_break_it_every_spelling_of_the_subject_is_erased(app, world, stored, asked):
    """Evidence by the subject under another spelling of its reference (scheme case,
    an at-uri naming only the account) is erased by a request for the subject."""
    marker = "quokka-spelling-7702"
    intake_report({"external_id": "spelling-1", "summary": "a report",
                   "targets": [{"reference": "post:7702", "kind": "post",
                                "evidence": {"content_text": marker, "author_reference": stored,
                                             "author_name": "quokka_spelling"}}]},
                  world.integration_id)
    approved_erasure(world, asked)
    assert holding(marker) == []


def test_ops3_break_it_rotation_refuses_a_tampered_value(app, world):
    """A sealed value whose body was cut is refused like one under a missing key:
    `RotationRefused` (``secrets_unreadable``), nothing changed."""
    reviewer = db.session.scalar(select(OperatorUser.id).where(OperatorUser.email == "reviewer@example.com"))
    raw = db.session.execute(sql("SELECT totp_secret FROM operator_users WHERE id = :i"), {"i": reviewer}).scalar()
    prefix, kid, body = raw.split(":", 2)
    cut = f"{prefix}:{kid}:{body[:-3]}"
    db.session.execute(sql("UPDATE operator_users SET totp_secret = :v WHERE id = :i"), {"v": cut, "i": reviewer})
    db.session.commit()
    # step 1 of docs/secrets.md: a new current key, the old one kept for opening
    app.extensions["secret_box"] = box_from_texts(new_key_text(), app.config["SECRETS_KEY"])
    with pytest.raises(RotationRefused):
        rotate_secrets_key({"user": "test", "host": "test"})
