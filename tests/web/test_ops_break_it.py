"""Break-it findings on sealed secrets (OPS-3) and the second factor (OPS-2).

Each test is marked xfail(strict=True): it passes while the weakness is there and
fails once it is fixed (then remove the mark)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select, text as sql

from app.demo import DEMO_PASSWORD
from app.extensions import db
from app.models import OperatorUser
from app.secret_box import SecretBoxError, UnreadableSecret

from ..builders import totp_code
from ..conftest import csrf_from
from .test_admin import admin, text


def operator_id(email: str) -> str:
    db.session.rollback()
    return db.session.scalar(select(OperatorUser.id).where(OperatorUser.email == email))


def raw_seed(op_id: str) -> str:
    return db.session.execute(sql("SELECT totp_secret FROM operator_users WHERE id = :i"), {"i": op_id}).scalar()


def store_raw_seed(op_id: str, value: str) -> None:
    db.session.execute(sql("UPDATE operator_users SET totp_secret = :v WHERE id = :i"), {"v": value, "i": op_id})
    db.session.commit()


def tampered(value: str) -> list[str]:
    """A sealed value altered the ways a bad disk or a careless edit alters it: a cut
    body (base64 no longer decodes) and a body too short to hold a nonce."""
    prefix, kid, body = value.split(":", 2)
    return [f"{prefix}:{kid}:{body[:-3]}", f"{prefix}:{kid}:AAAA"]


def test_ops3_break_it_a_tampered_ciphertext_is_unreadable_not_an_error(app, world):
    """A tampered sealed value raises `SecretBoxError` from the box and loads as an
    `UnreadableSecret` through the column, as one sealed under a missing key does."""
    box = app.extensions["secret_box"]
    reviewer = operator_id("reviewer@example.com")
    for value in tampered(raw_seed(reviewer)):
        with pytest.raises(SecretBoxError):
            box.open(value, context="operator_users.totp_secret")
        store_raw_seed(reviewer, value)
        db.session.expire_all()
        assert isinstance(db.session.get(OperatorUser, reviewer).totp_secret, UnreadableSecret)


def test_ops3_break_it_a_tampered_seed_does_not_break_the_users_page(app, client, world):
    """The users page still answers 200 when one operator's sealed seed was altered."""
    admin(client)
    reviewer = operator_id("reviewer@example.com")
    store_raw_seed(reviewer, tampered(raw_seed(reviewer))[0])
    assert client.get("/admin/users").status_code == 200


@pytest.mark.xfail(strict=True, reason=(
    "OPS-3: a sealed value is bound to its column only, not to its row: another operator's "
    "totp_secret ciphertext copied into this operator's row opens (so does a connection version's "
    "bearer token moved to another version)"))
def test_ops3_break_it_a_sealed_value_moved_to_another_row_does_not_open(app, world):
    """admin2's sealed seed copied raw into the reviewer's row must not open as the
    reviewer's seed (whoever can write the table but holds no key could otherwise put
    a seed they know on an account whose password they know)."""
    reviewer, admin2 = operator_id("reviewer@example.com"), operator_id("admin2@example.com")
    store_raw_seed(reviewer, raw_seed(admin2))
    db.session.expire_all()
    assert isinstance(db.session.get(OperatorUser, reviewer).totp_secret, UnreadableSecret)


def password_step(client, email: str):
    token = csrf_from(text(client.get("/login")))
    return client.post("/login", data={"email": email, "password": DEMO_PASSWORD, "csrf_token": token})


def new_reviewer(installation_id: str, email: str) -> None:
    from app.services.admin.operators import create_operator
    from app.services.uow import Actor

    create_operator(installation_id, email=email, password=DEMO_PASSWORD, display_name="New reviewer",
                    roles=["reviewer"], actor=Actor.system("test"))


def shown_seed(client) -> str:
    return re.search(r'class="totp-seed">([A-Z2-7]+)<', text(client.get("/login/enrol"))).group(1)


def test_ops2_break_it_each_sign_in_enrols_with_its_own_seed(app, world):
    """Two password sign-ins of a reviewer not enrolled yet (an attacker's, then the
    holder's) are shown different seeds; the holder's enrolment is not one the
    first browser can produce codes for."""
    new_reviewer(world.installation_id, "fresh-reviewer@example.com")
    attacker, holder = app.test_client(), app.test_client()
    assert password_step(attacker, "fresh-reviewer@example.com").headers["Location"].endswith("/login/enrol")
    seen = shown_seed(attacker)
    assert password_step(holder, "fresh-reviewer@example.com").headers["Location"].endswith("/login/enrol")
    assert shown_seed(holder) != seen


def test_ops2_break_it_a_refused_code_ends_the_pending_step_for_a_replayed_cookie(app, client, world):
    """OPS-2, SEC-6: after a wrong code the next try starts with the password, even when
    the browser sends back the session cookie it had before the refusal (the step's
    nonce is spent on the server)."""
    assert password_step(client, "reviewer@example.com").headers["Location"].endswith("/login/second-factor")
    before_refusal = client.get_cookie("session").value
    page = text(client.get("/login/second-factor"))
    assert client.post("/login/second-factor", data={"code": "000000", "csrf_token": csrf_from(page)}).status_code == 401
    client.set_cookie("session", before_refusal)
    replayed = client.post("/login/second-factor",
                           data={"code": totp_code("reviewer@example.com"), "csrf_token": csrf_from(page)})
    assert replayed.status_code == 401
    assert client.get("/proposals").status_code == 302


def test_ops1_break_it_an_unverified_email_sent_as_a_string_is_refused(app, client, world, idp):
    """An ID token with ``email_verified: "false"`` creates no account (403
    ``sso_email_missing``), as one with the boolean false does."""
    from .test_ops1_sso import operator, set_mapping
    from ..oidc import sso_sign_in

    set_mapping(app, client)
    idp.set_user("str-sub", email="unverified@idp.example.org", email_verified="false", groups=["ts-moderators"])
    response = sso_sign_in(app.test_client(), idp, "str-sub")
    assert response.status_code == 403 and "sso_email_missing" in text(response)
    assert operator("unverified@idp.example.org") is None


def test_ops2_break_it_a_plain_seed_written_into_the_table_is_not_a_second_factor(app, world):
    """A base32 seed written unsealed into a reviewer's ``totp_secret`` (by whoever can
    write the table but holds no key) is not accepted as their seed: codes of it do
    not pass the second step."""
    import pyotp

    from app.domain.errors import ApiError
    from app.services.admin.mfa import verify_second_factor

    reviewer = operator_id("reviewer@example.com")
    known = pyotp.random_base32()
    store_raw_seed(reviewer, known)
    db.session.execute(sql("UPDATE operator_users SET totp_last_step = NULL WHERE id = :i"), {"i": reviewer})
    db.session.commit()
    with pytest.raises(ApiError):
        verify_second_factor(reviewer, pyotp.TOTP(known).now())


def test_ops1_break_it_a_callback_error_without_this_browsers_state_shows_no_foreign_text(app, client, world, idp):
    """A callback carrying ``error`` but no state this browser started is refused as
    ``sso_state_invalid`` (or at least shows none of the parameters' text)."""
    spoof = "Your account is locked. Call support at +1 555 0100 or visit evil.example"
    response = client.get("/login/sso/callback", query_string={"error": "access_denied", "error_description": spoof})
    assert "evil.example" not in text(response)


def test_ops2_a_used_step_cannot_sign_in_again_from_a_replayed_cookie(app, client, world):
    """OPS-2, SEC-6: the cookie from before a successful second step, replayed after
    signing out, does not sign in again with a fresh code."""
    assert password_step(client, "reviewer@example.com").headers["Location"].endswith("/login/second-factor")
    before = client.get_cookie("session").value
    page = text(client.get("/login/second-factor"))
    assert client.post("/login/second-factor",
                       data={"code": totp_code("reviewer@example.com"), "csrf_token": csrf_from(page)}).status_code == 303
    client.set_cookie("session", before)
    replayed = client.post("/login/second-factor",
                           data={"code": totp_code("reviewer@example.com"), "csrf_token": csrf_from(page)})
    assert replayed.status_code == 401
