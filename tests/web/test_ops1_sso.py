"""Single sign-on through OpenID Connect (SPEC OPS-1), against a real provider on
loopback (oidc-provider-mock): the group→role mapping is a four-eyes change, a new
identity with a mapped group is created just in time, a known one gets exactly its
mapped roles at each sign-in (a removed group loses its role), and every refusal is a
page with a code, never a 500."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

from sqlalchemy import select

from app.domain.sso import ROLES as DOMAIN_ROLES
from app.extensions import db
from app.models import OperatorUser, SsoGroupRole, SsoIdentity
from app.models.tenancy import ROLES

from ..conftest import csrf_from
from ..builders import approve_in_console, approve_pending, login, pending_changes
from ..oidc import path_of, sso_sign_in
from .test_admin import admin, assert_refused, audits, post, text

MAPPING = "ts-moderators = moderator\nts-auditors = auditor\nts-reviewers = reviewer\nts-reviewers = moderator"


def set_mapping(app, client, mapping: str = MAPPING) -> None:
    """An admin proposes the mapping, a second admin approves it (FOUR-2)."""
    csrf = admin(client)
    response = post(client, "/admin/sso", csrf, mapping=mapping)
    assert response.status_code == 303, text(response)[:2000]
    approve_pending(app)
    client.post("/logout", data={"csrf_token": csrf})


def operator(email: str) -> OperatorUser | None:
    db.session.rollback()
    return db.session.scalar(select(OperatorUser).where(OperatorUser.email == email))


def test_ops1_the_mapping_is_a_four_eyes_change(app, client, world, idp):
    """OPS-1, FOUR-2: one admin's proposal is stored, not applied; the proposer cannot
    approve it; a second admin's approval applies it (audited); the admin page shows
    the pending change, then the mapping in force."""
    csrf = admin(client)
    response = post(client, "/admin/sso", csrf, mapping=MAPPING)
    [change] = pending_changes()
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{change.id}")
    assert change.kind == "sso.mapping" and db.session.scalars(select(SsoGroupRole)).all() == []
    page = text(client.get("/admin/sso"))
    assert f"/admin/changes/{change.id}" in page and "nobody can sign in through the provider" in page
    assert idp.issuer in page and "/login/sso/callback" in page
    alone = approve_in_console(app, change.id, "admin@example.com")
    assert alone.status_code == 403 and db.session.scalars(select(SsoGroupRole)).all() == []
    approve_pending(app)
    pairs = {(row.group_name, row.role) for row in db.session.scalars(select(SsoGroupRole))}
    assert pairs == {("ts-moderators", "moderator"), ("ts-auditors", "auditor"), ("ts-reviewers", "reviewer"),
                     ("ts-reviewers", "moderator")}
    [applied] = audits("sso.mapping_set")
    assert json.loads(applied.details_json)["config_change_id"] == change.id
    page = text(client.get("/admin/sso"))
    assert 'id="sso-mapping"' in page and "ts-reviewers" in page and 'id="sso-pending"' not in page


def test_ops1_a_bad_mapping_is_refused_and_nothing_is_stored(app, client, world, idp):
    """OPS-1: an unknown role or a line without ``=`` is refused with its code (400)."""
    csrf = admin(client)
    assert_refused(post(client, "/admin/sso", csrf, mapping="ts-mods = overlord"), 400, "sso_mapping_role_invalid")
    assert_refused(post(client, "/admin/sso", csrf, mapping="ts-mods moderator"), 400, "sso_mapping_invalid")
    assert pending_changes() == []
    auditor = app.test_client()
    token = login(auditor, "auditor@example.com")
    assert post(auditor, "/admin/sso", token, mapping=MAPPING).status_code == 403


def test_ops1_a_new_identity_is_created_with_its_mapped_roles(app, client, world, idp):
    """OPS-1: an unknown identity with a mapped group signs in through the provider's
    page, is created just in time as an ``sso`` account with exactly the mapped roles
    (audited), and lands on the console."""
    set_mapping(app, client)
    idp.set_user("alice-sub", email="alice@idp.example.org", name="Alice", groups=["ts-moderators", "sales"])
    response = sso_sign_in(client, idp, "alice-sub")
    assert response.status_code == 303, text(response)[:2000]
    alice = operator("alice@idp.example.org")
    assert alice.roles == {"moderator"} and alice.sign_in_method == "sso" and alice.display_name == "Alice"
    identity = db.session.scalar(select(SsoIdentity).where(SsoIdentity.operator_id == alice.id))
    assert (identity.issuer, identity.subject) == (idp.issuer, "alice-sub")
    [created] = [row for row in audits("operator.created") if row.target_id == alice.id]
    assert json.loads(created.details_json)["sign_in_method"] == "sso" and created.actor_id == "sso"
    assert client.get("/queue").status_code == 200
    admin_browser = app.test_client()
    admin(admin_browser)
    assert "through single sign-on" in text(admin_browser.get(f"/admin/users/{alice.id}"))


def test_ops1_a_removed_group_loses_its_role_at_the_next_sign_in(app, client, world, idp):
    """OPS-1: the operator's roles are set to the mapped ones at every sign-in; the
    change is audited from → to; the page the lost role opened answers 403."""
    set_mapping(app, client)
    idp.set_user("bob-sub", email="bob@idp.example.org", groups=["ts-moderators", "ts-auditors"])
    assert sso_sign_in(client, idp, "bob-sub").status_code == 303
    assert operator("bob@idp.example.org").roles == {"moderator", "auditor"}
    assert client.get("/admin/").status_code == 200
    idp.set_user("bob-sub", email="bob@idp.example.org", groups=["ts-moderators"])
    assert sso_sign_in(app.test_client(), idp, "bob-sub").status_code == 303
    assert operator("bob@idp.example.org").roles == {"moderator"}
    [changed] = audits("operator.sso_roles_changed")
    assert json.loads(changed.details_json) | {"groups": None, "issuer": None} == {
        "from": ["auditor", "moderator"], "to": ["moderator"], "groups": None, "issuer": None}
    assert client.get("/admin/").status_code == 403  # the older session too: roles are read per request


def test_ops1_no_role_left_refuses_the_sign_in_and_ends_every_session(app, client, world, idp):
    """OPS-1: with no mapped group left, sign-in is refused (403 ``sso_no_role``), the
    account keeps no role and its open sessions end (session version bumped)."""
    set_mapping(app, client)
    idp.set_user("carol-sub", email="carol@idp.example.org", groups=["ts-moderators"])
    assert sso_sign_in(client, idp, "carol-sub").status_code == 303
    idp.set_user("carol-sub", email="carol@idp.example.org", groups=["sales"])
    assert_refused(sso_sign_in(app.test_client(), idp, "carol-sub"), 403, "sso_no_role")
    carol = operator("carol@idp.example.org")
    assert carol.roles == frozenset() and carol.session_version == 2
    assert client.get("/queue").status_code in (302, 303)  # the first session was signed out


def test_ops1_an_unknown_identity_without_a_mapped_group_is_refused(app, client, world, idp):
    """OPS-1: no mapped group, no account: 403 ``sso_no_role`` and nothing written; an
    email that is not ASCII (a lookalike, FOUR-10) is refused as for invited accounts."""
    set_mapping(app, client)
    idp.set_user("dave-sub", email="dave@idp.example.org", groups=["sales"])
    assert_refused(sso_sign_in(client, idp, "dave-sub"), 403, "sso_no_role")
    assert operator("dave@idp.example.org") is None
    idp.set_user("jane-sub", email="j\u0430ne@idp.example.org", groups=["ts-moderators"])  # a Cyrillic a (FOUR-10)
    assert_refused(sso_sign_in(client, idp, "jane-sub"), 403, "sso_email_not_ascii")
    assert db.session.scalars(select(SsoIdentity)).all() == []


def test_ops1_the_email_of_a_password_account_is_never_taken_over(app, client, world, idp):
    """OPS-1: an IdP user whose email is a password account's is refused (409
    ``sso_email_taken``): the accounts are not joined by email, and the refusal does not
    repeat the address (an IdP user must not learn which emails have accounts here)."""
    set_mapping(app, client, "ts-admins = admin")
    idp.set_user("eve-sub", email="admin@example.com", groups=["ts-admins"])
    refused = sso_sign_in(client, idp, "eve-sub")
    assert_refused(refused, 409, "sso_email_taken")
    assert "admin@example.com" not in refused.get_data(as_text=True)
    assert db.session.scalars(select(SsoIdentity)).all() == []
    assert operator("admin@example.com").sign_in_method == "password"


def test_ops1_an_sso_account_cannot_sign_in_with_a_password(app, client, world, idp):
    """OPS-1: an ``sso`` account is refused by the password form, even with a password set."""
    set_mapping(app, client)
    idp.set_user("fred-sub", email="fred@idp.example.org", groups=["ts-moderators"])
    assert sso_sign_in(client, idp, "fred-sub").status_code == 303
    fred = operator("fred@idp.example.org")
    fred.set_password("a perfectly good password")
    db.session.commit()
    other = app.test_client()
    token = csrf_from(text(other.get("/login")))
    response = other.post("/login", data={"email": fred.email, "password": "a perfectly good password",
                                          "csrf_token": token})
    assert response.status_code == 401


def test_ops1_refusals_have_a_code_and_never_a_500(app, client, world, idp):
    """OPS-1: a callback with a state this browser did not start (400
    ``sso_state_invalid``), the provider's error parameter (401 ``sso_idp_refused``),
    an ID token without the groups claim (403 ``sso_groups_missing``), a code the
    token endpoint refuses (401 ``sso_token_refused``), the provider down at the start
    or at the callback (503 ``sso_unavailable``), SSO off (404 ``sso_not_configured``)."""
    set_mapping(app, client)
    start = client.get("/login/sso")
    callback = idp.authorize(start.headers["Location"], "gina-sub")
    assert_refused(app.test_client().get(path_of(callback)), 400, "sso_state_invalid")
    assert_refused(client.get("/login/sso/callback?state=made-up&code=x"), 400, "sso_state_invalid")
    start = client.get("/login/sso")
    denied = idp.authorize(start.headers["Location"], deny=True)
    assert_refused(client.get(path_of(denied)), 401, "sso_idp_refused")
    idp.set_user("hank-sub", email="hank@idp.example.org")
    assert_refused(sso_sign_in(client, idp, "hank-sub"), 403, "sso_groups_missing")
    assert operator("hank@idp.example.org") is None
    idp.set_user("ivan-sub", email="ivan@idp.example.org", groups=["ts-moderators"])
    start = client.get("/login/sso")  # the code is the first client's; the second one redeems it
    callback = idp.authorize(start.headers["Location"], "ivan-sub")
    app.config["OIDC_CLIENT_ID"] = "another-client"
    assert_refused(client.get(path_of(callback)), 401, "sso_token_refused")
    idp.configure(app)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    start = client.get("/login/sso")
    callback = idp.authorize(start.headers["Location"], "ivan-sub")
    app.config["OIDC_ISSUER"] = f"http://127.0.0.1:{port}"  # the provider is gone before the code is redeemed
    assert_refused(client.get(path_of(callback)), 503, "sso_unavailable")
    assert_refused(client.get("/login/sso"), 503, "sso_unavailable")
    assert operator("ivan@idp.example.org") is None
    app.config["OIDC_ISSUER"] = None
    assert "Sign in with" not in text(client.get("/login"))
    assert_refused(client.get("/login/sso"), 404, "sso_not_configured")


def test_ops1_the_sign_in_page_offers_the_provider(app, client, world, idp):
    """OPS-1: with SSO configured the sign-in page has "Sign in with <label>"; the
    redirect URI sent to the provider is on PUBLIC_URL when set, whatever the Host."""
    page = text(client.get("/login"))
    assert "Sign in with Example IdP" in page and 'href="/login/sso"' in page
    app.config["PUBLIC_URL"] = "https://console.example.org"
    start = client.get("/login/sso", headers={"Host": "attacker.example"})
    assert "redirect_uri=https%3A%2F%2Fconsole.example.org%2Flogin%2Fsso%2Fcallback" in start.headers["Location"]


def test_ops1_the_domain_roles_are_the_models():
    """OPS-1: app.domain.sso checks roles against the same list the accounts use."""
    assert DOMAIN_ROLES == ROLES


def test_ops1_the_docs_command_answers(idp):
    """OPS-1: every ```bash command of docs/sso.md, read from the doc and run as written
    with ``OIDC_ISSUER`` set to the provider on loopback, succeeds; the discovery
    document names that issuer."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sso.md").read_text()
    commands = [line for block in re.findall(r"```bash\n(.*?)```", doc, re.S) for line in block.splitlines() if line]
    assert commands == ['curl -fsS "$OIDC_ISSUER/.well-known/openid-configuration"']
    for command in commands:
        done = subprocess.run(["bash", "-c", command], env={**os.environ, "OIDC_ISSUER": idp.issuer},
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["issuer"] == idp.issuer
