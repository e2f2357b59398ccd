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
def test_ops4_break_it_every_spelling_of_the_subject_is_erased(app, world, stored, asked):
    """Evidence by the subject under another spelling of its reference (scheme case,
    an at-uri naming only the account) is erased by a request for the subject."""
    marker = "quokka-spelling-7702"
    intake_report({"external_id": "spelling-1", "summary": "a report",
                   "targets": [{"reference": "post:7702", "kind": "post",
                                "evidence": {"content_text": marker, "author_reference": stored,
                                             "author_name": "quokka_spelling"}}]},
                  world.integration_id)
    approved = approved_erasure(world, asked)
    assert holding(marker) == []
    assert approved.counts["evidence"] == 1 and approved.counts["subjects"] == 1


def test_ops4_erasure_spares_references_that_only_look_alike(app, world):
    """OPS-4: a reference holding the subject's as a part (``user:770012``,
    ``post:user:77001``) or matching it only through a LIKE wildcard (``_``) is another
    subject: its evidence is kept."""
    kept = {"user:770012": "kept-longer-7703", "Post:user:77001": "kept-nested-7704", "user:a1b": "kept-wild-7705"}
    for number, (author, marker) in enumerate(kept.items()):
        intake_report({"external_id": f"alike-{number}", "summary": "a report",
                       "targets": [{"reference": f"post:77{number}", "kind": "post",
                                    "evidence": {"content_text": marker, "author_reference": author}}]},
                      world.integration_id)
    for asked in ("user:77001", "user:a_b"):
        approved = approved_erasure(world, asked)
        assert approved.counts == {"evidence": 0, "reports": 0, "appeals": 0, "subjects": 0}
    for marker in kept.values():
        assert sorted(holding(marker)) == ["report_evidence.content_text", "report_subjects.preview",
                                   "report_subjects.search_text"], marker


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
