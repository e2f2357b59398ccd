"""Break-it tests of the POL pages as a misbehaving client (SPEC POL-1, POL-3, POL-6):
odd ids, NUL bytes, huge or missing fields must be clear 4xx answers, never a 500,
and store nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import ActionApproval, ApprovalSettingsVersion, ApprovalVote, ConfigChange, EmergencyReview

from ..builders import login, make_operator, make_proposal, reload
from .test_admin import admin, post

REASON = "Live-streamed attack spreading now; every minute it stays up it is re-shared"


def stored():
    db.session.rollback()
    return tuple(db.session.scalar(select(func.count()).select_from(m))
                 for m in (ActionApproval, ApprovalVote, EmergencyReview, ConfigChange, ApprovalSettingsVersion))


def test_pol6_an_emergency_on_an_id_with_nul_is_a_404(app, client, team):
    """POL-6 (refused): a NUL in the proposal id is a 404 on both backends, nothing stored."""
    lead = make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])
    token = login(client, lead.email)
    before = stored()
    response = client.post("/proposals/act_%00x/emergency", data={
        "csrf_token": token, "payload_digest": "sha256:" + "0" * 64, "idempotency_key": "k", "reason": REASON})
    assert response.status_code == 404
    assert stored() == before


@pytest.mark.parametrize("path", ["/emergency-reviews/%00", "/emergency-reviews/" + "x" * 3000,
                                  "/proposals/nope/emergency", "/proposals/" + "p" * 3000 + "/decision"])
def test_pol6_odd_ids_on_the_emergency_and_decision_forms_are_never_a_500(app, client, team, path):
    """POL-6, POL-1 (refused): an unknown, huge or NUL id is a 4xx, nothing stored."""
    lead = make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])
    token = login(client, lead.email)
    before = stored()
    response = client.post(path, data={"csrf_token": token, "payload_digest": "x", "idempotency_key": "k",
                                       "reason": REASON, "verdict": "agree", "decision": "approved"})
    assert 400 <= response.status_code < 500, response.status_code
    assert stored() == before


@pytest.mark.parametrize("fields", [
    {},
    {"reason": REASON},
    {"reason": REASON, "payload_digest": "sha256:" + "f" * 64, "idempotency_key": "k" * 5000},
    {"reason": "\x00" * 40 + " a b c d e", "payload_digest": "x", "idempotency_key": "k"},
    {"reason": REASON * 100, "payload_digest": "x", "idempotency_key": "k"},
])
def test_pol6_a_broken_emergency_form_is_refused_with_a_code(app, client, team, fields):
    """POL-6 (refused): missing or absurd fields: a 4xx, the proposal still waits."""
    lead = make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])
    proposal = make_proposal(team)
    token = login(client, lead.email)
    before = stored()
    response = client.post(f"/proposals/{proposal.id}/emergency", data={"csrf_token": token, **fields})
    assert 400 <= response.status_code < 500, response.status_code
    assert stored() == before and reload(proposal).state == "approval_required"


@pytest.mark.parametrize("text", ["", "   ", "x" * 100_001, "\x00", '{"policies": "\\u0000"}', "[" * 100_000,
                                  '{"policies": [], "routes": [], "extra": 1}'])
def test_pol3_a_broken_settings_form_is_a_400_and_stores_nothing(app, client, world, text):
    """POL-3 (refused): empty, huge, NUL, deep, unknown-key documents: 400, nothing stored."""
    csrf = admin(client)
    before = stored()
    response = post(client, "/admin/approvals", csrf, settings=text)
    assert response.status_code == 400, response.status_code
    assert stored() == before
