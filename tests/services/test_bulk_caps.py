"""Caps on items per bulk batch as a four-eyes change (SPEC BULK-5, FOUR-2)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.bulk.batch import DEFAULT_CAP
from app.domain.config_changes import ChangeKind, second_admin_reasons
from app.domain.errors import ApiError
from app.extensions import db
from app.models import AuditEvent, BulkBatch, BulkCap, BulkItem
from app.services.admin.bulk_caps import cap_table, propose_cap
from app.services.admin.reviews import approve_change
from app.services.bulk.actions import bulk_actions
from app.services.bulk.dry_runs import operator_cap, start_dry_run
from tests.builders import pending_changes


def _count(model) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model))


def _dry_run(team, count: int) -> str:
    action = bulk_actions(db.session, team.installation_id)[0]
    return start_dry_run(
        team.user("moderator"),
        selection={"source": "list", "text": "\n".join(f"post:{n}" for n in range(count))},
        action_key=action.key,
        decision_code=action.decision_code,
        reason="spam network",
    )


def test_bulk_5_a_cap_applies_only_when_a_second_admin_approves_it(app, team):
    """BULK-5, FOUR-2: proposing a cap changes nothing; its proposer cannot approve it;
    a second admin's approval bound to the digest sets it, and the dry run uses it."""
    admin, admin2, moderator = team.user("admin"), team.user("admin2"), team.user("moderator")
    pending = propose_cap(admin, role="moderator", max_items="3")
    [change] = pending_changes()
    assert change.id == pending.change_id and change.kind == ChangeKind.BULK_CAP.value
    assert "lowers the items per bulk batch for moderator from 1,000 to 3" in pending.reasons[0]
    assert _count(BulkCap) == 0 and operator_cap(db.session, moderator) == DEFAULT_CAP
    with pytest.raises(ApiError) as refused:
        approve_change(admin, change.id, change.digest)
    assert refused.value.code == "maker_checker_violation"
    with pytest.raises(ApiError) as mismatch:
        approve_change(admin2, change.id, "sha256:" + "0" * 64)
    assert mismatch.value.code == "config_change_digest_mismatch"
    assert _count(BulkCap) == 0 and operator_cap(db.session, moderator) == DEFAULT_CAP
    assert approve_change(admin2, change.id, change.digest) == {"role": "moderator", "max_items": 3}
    db.session.rollback()
    assert operator_cap(db.session, moderator) == 3
    assert [row.max_items for row in cap_table(team.installation_id) if row.role == "moderator"] == [3]
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "bulk.cap_set"))
    assert audit.details["previous"] == DEFAULT_CAP and audit.details["config_change_id"] == change.id


def test_bulk_5_a_dry_run_over_the_cap_is_refused_and_stores_nothing(app, team):
    """BULK-5: after a cap of 3 is approved, a selection of 4 subjects is refused with
    bulk_selection_over_cap and no batch or item is stored; 3 subjects pass."""
    propose_cap(team.user("admin"), role="moderator", max_items=3)
    [change] = pending_changes()
    approve_change(team.user("admin2"), change.id, change.digest)
    db.session.rollback()
    with pytest.raises(ApiError) as refused:
        _dry_run(team, 4)
    assert "bulk_selection_over_cap" in {refused.value.code, *(line.code for line in refused.value.lines)}
    assert _count(BulkBatch) == 0 and _count(BulkItem) == 0
    batch_id = _dry_run(team, 3)
    assert db.session.get(BulkBatch, batch_id).counts["would_act"] == 3


def test_bulk_5_raising_and_lowering_both_need_a_second_admin():
    """BULK-5: unlike a budget limit, a cap lowered needs a second admin as one raised does."""
    raised = second_admin_reasons(ChangeKind.BULK_CAP, {"role": "reviewer", "max_items": 5000}, {"max_items": 1000})
    lowered = second_admin_reasons(ChangeKind.BULK_CAP, {"role": "reviewer", "max_items": 10}, {"max_items": 1000})
    assert "raises" in raised[0] and "5,000" in raised[0]
    assert "lowers" in lowered[0] and "stop an enforcement wave" in lowered[0]


@pytest.mark.parametrize(
    ("role", "max_items", "code"),
    [
        ("janitor", 10, "bulk_cap_role_invalid"),
        (None, 10, "bulk_cap_role_invalid"),
        ("reviewer", 0, "bulk_cap_invalid"),
        ("reviewer", 100_001, "bulk_cap_invalid"),
        ("reviewer", "12a", "bulk_cap_invalid"),
        ("reviewer", True, "bulk_cap_invalid"),
    ],
)
def test_bulk_5_a_bad_cap_is_refused_with_its_code_and_stores_nothing(app, team, role, max_items, code):
    """BULK-5: a role that is not known, or a cap outside 1..100,000, is refused; nothing stored."""
    with pytest.raises(ApiError) as refused:
        propose_cap(team.user("admin"), role=role, max_items=max_items)
    assert (refused.value.status, refused.value.code) == (400, code)
    assert pending_changes() == []


def test_bulk_5_only_an_admin_proposes_and_the_same_cap_is_no_change(app, team):
    """BULK-5: a reviewer cannot propose a cap; proposing the cap a role has stores nothing."""
    with pytest.raises(ApiError) as refused:
        propose_cap(team.user("reviewer"), role="reviewer", max_items=5)
    assert refused.value.code == "forbidden"
    assert propose_cap(team.user("admin"), role="reviewer", max_items=DEFAULT_CAP) is None
    assert pending_changes() == []


def test_bulk_5_the_cli_proposes_a_cap_for_a_second_admin(app, team, runner):
    """BULK-5, FOUR-4: ``flask bulk-cap ROLE N`` stores a pending change; the CLI is no way round."""
    admin = team.user("admin")
    result = runner.invoke(args=["bulk-cap", "reviewer", "5000", "--installation", team.slug, "--proposer", admin.email])
    assert result.exit_code == 0, result.output
    [change] = pending_changes()
    assert change.content == {"role": "reviewer", "max_items": 5000} and change.digest in result.output
    assert _count(BulkCap) == 0
    bad = runner.invoke(args=["bulk-cap", "reviewer", "0", "--installation", team.slug, "--proposer", admin.email])
    assert bad.exit_code == 1 and "bulk_cap_invalid" in bad.output
    assert len(pending_changes()) == 1
