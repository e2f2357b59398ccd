"""The affected user's notice of an applied restriction, delivered to the demo
platform as a `notify_user` action under the restriction's approval
(app/services/dsa/notices.py, SPEC DSA-4).

Through the real flow: DSA settings in force, the restriction decided, approved and
applied; its applied receipt's transaction builds the statement of reasons (DSA-2)
and queues the notice. The tests read what that flow wrote."""

from __future__ import annotations

from sqlalchemy import func, select

from app.demo_dsa import DEMO_DSA_SETTINGS
from app.domain.dsa import puid_for
from app.domain.dsa_settings import settings_from_json
from app.extensions import db
from app.models import ActionApproval, ActionProposal, AuditEvent, ComponentDefinition, OperatorUser, Report
from app.services.dsa.notices import notice_of
from app.services.lifecycle.dispatch import deliver
from tests.builders import decide_report, make_world, reload, run_worker, set_dsa_settings, set_row
from tests.dsa_notice_steps import AUTHOR, applied_removal, notify, queued_notice, statement_of


def notices_count() -> int:
    db.session.rollback()
    return db.session.scalar(
        select(func.count()).select_from(ActionProposal).where(ActionProposal.action_code == "notify_user")
    )


def test_dsa4_notice_is_delivered_once_after_the_restriction_under_its_approval(app, world, platform):
    """DSA-4: the applied removal's notice is one notify_user proposal to the post's
    author, in the user's language, authorized by the removal's approval; the worker
    delivers it once, after the restriction; calling again creates nothing."""
    set_dsa_settings(world.installation_id)
    removal = applied_removal(world, platform, language="de")
    statement = statement_of(removal)
    assert statement.language == "de"  # the report's evidence is German
    notice = queued_notice(removal)  # queued by the applied receipt's transaction
    assert notice is not None and statement.notice_proposal_id == notice.id
    assert (notice.action_code, notice.state, notice.target) == (
        "notify_user", "queued", {"kind": "account", "reference": AUTHOR}
    )
    assert notice.payload["puid"] == puid_for(removal.id) and notice.payload["language"] == "de"
    assert "Entfernung von Inhalten" in notice.payload["text"] and notice.payload["subject"]
    assert notice.created_at >= removal.confirmed_at
    restriction_approval = db.session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == removal.id))
    [granted] = db.session.scalars(select(ActionApproval).where(ActionApproval.proposal_id == notice.id)).all()
    assert (granted.payload_digest, granted.approver_id) == (notice.payload_digest, restriction_approval.approver_id)
    assert restriction_approval.id in granted.reason

    db.session.rollback()  # no read transaction open while the worker writes
    run_worker(app)
    assert reload(notice).state == "applied"
    [delivered] = platform.state.notices
    assert (delivered["user"], delivered["puid"], delivered["language"]) == (AUTHOR, puid_for(removal.id), "de")
    assert delivered["text"] == notice.payload["text"]
    assert [e["effect"] for e in platform.state.effects] == ["removed"]  # a notice changes no post

    assert notify(removal.id) == notice.id  # exactly once
    db.session.rollback()
    run_worker(app)
    assert notices_count() == 1 and len(platform.state.notices) == 1
    db.session.rollback()
    queued = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "dsa.notice_queued")).all()
    assert [row.target_id for row in queued] == [notice.id]


def test_dsa4_the_notice_declares_no_restriction(app, world, platform):
    """DSA-4: the notice component restricts nothing, so its own applied receipt
    makes no statement of reasons (DSA-2 reads the component's declaration)."""
    settings = settings_from_json(DEMO_DSA_SETTINGS)
    assert settings.notice_component == "notify_user"
    assert settings.restriction_of("notify_user") is None
    assert settings.restriction_of("takedown") is not None


def test_dsa4_no_notice_component_configured_sends_nothing(app, world, platform):
    """DSA-4: with no notice component in the settings, or one that is not active,
    a restriction's statement queues no notice."""
    set_dsa_settings(world.installation_id, {**DEMO_DSA_SETTINGS, "notice_component": None})
    removal = applied_removal(world, platform)
    assert statement_of(removal) is not None and queued_notice(removal) is None
    assert notify(removal.id) is None
    definition_id = db.session.scalar(select(ComponentDefinition.id).where(ComponentDefinition.slug == "notify_user"))
    set_row(ComponentDefinition, definition_id, status="retired")
    assert notify(removal.id, settings_from_json(DEMO_DSA_SETTINGS)) is None
    db.session.rollback()
    run_worker(app)
    assert notices_count() == 0 and platform.state.notices == []
    db.session.rollback()
    assert statement_of(removal).notice_proposal_id is None
    assert notice_of(db.session, removal) is None


def test_dsa4_notice_reaches_the_user_on_a_case_closed_after_the_restriction(app, world, platform):
    """DSA-4: the user is owed the notice whatever became of the case: one closed (or
    appealed) after the restriction applied still gets its notice delivered."""
    set_dsa_settings(world.installation_id)
    removal = applied_removal(world, platform)
    notice_id = queued_notice(removal).id
    set_row(Report, removal.report_id, state="closed")
    db.session.rollback()
    run_worker(app)
    assert db.session.get(ActionProposal, notice_id).state == "applied"
    [delivered] = platform.state.notices
    assert delivered["language"] == "en" and "Removal of content" in delivered["text"]


def test_dsa4_bounded_automation_notice_runs_under_the_same_automation(app, platform):
    """DSA-4: a bounded_auto restriction's notice needs no person: it carries the
    restriction's authority and approval mode, no approval row, and is delivered."""
    world = make_world(platform.url, approval_mode="bounded_auto", slug="auto")
    platform.configure_for(world)
    # the report carries no language: the notice is in the settings' default, here German
    set_dsa_settings(world.installation_id, {**DEMO_DSA_SETTINGS, "default_language": "de"})
    removal = decide_report(world)
    assert deliver(removal.id).state == "applied"
    removal = reload(removal)
    notice_id = queued_notice(removal).id
    assert notify(removal.id) == notice_id
    notice = db.session.get(ActionProposal, notice_id)
    assert (notice.approval_mode, notice.authority_mode) == (removal.approval_mode, removal.authority_mode)
    assert notice.approval_policy["notice"]["authorized_by_approval_id"] is None
    assert db.session.scalar(select(ActionApproval.id).where(ActionApproval.proposal_id == notice_id)) is None
    db.session.rollback()
    run_worker(app)
    assert db.session.get(ActionProposal, notice_id).state == "applied"
    assert [n["language"] for n in platform.state.notices] == ["de"]


def test_dsa4_a_notice_is_neither_compensated_nor_contested(app, world, platform):
    """DSA-4 (found by the new-user pass): a delivered notice cannot be "compensated"
    (no offer, and the service refuses ``action_notice_not_compensable``, nothing
    written), and an appeal's page lists only the restriction among the contested
    actions."""
    import pytest

    from app.domain.errors import ApiError
    from app.services.lifecycle.compensation import propose_compensation
    from app.services.read.review import contested_actions

    set_dsa_settings(world.installation_id)
    removal = applied_removal(world, platform)
    notice = queued_notice(removal)
    assert deliver(notice.id).state == "applied"
    before = db.session.scalar(select(func.count()).select_from(ActionProposal))
    reviewer = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "reviewer@example.com"))
    with pytest.raises(ApiError) as refused:
        propose_compensation(
            notice.id, component_version_id=world.components["restore"], action_code="restore",
            target=removal.target, payload={"reason_code": "x", "report_reference": "R-1"},
            idempotency_key="undo-notice", operator=reviewer,
        )
    assert refused.value.code == "action_notice_not_compensable"
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(ActionProposal)) == before
    assert [p.id for p in contested_actions(removal.report_id, removal.decision_id)] == [removal.id]
