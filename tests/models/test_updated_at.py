"""`updated_at` is stamped by SQLAlchemy (`onupdate`), not by hand.

It is set on INSERT, and again by every UPDATE that does not set it itself: ORM
flushes and core ``update()`` statements alike. A statement that names a value (the
guarded state moves do) keeps that value.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text, update

from app.domain.clock import utcnow
from app.domain.states import Move
from app.extensions import db
from app.models import ActionProposal, Base, Budget, Installation
from app.models import statements
from app.models.base import insert_ignore
from app.models.proposals import move_proposal

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture
def budget(app) -> Budget:
    installation = Installation(name="Stamps", slug="stamps")
    db.session.add(installation)
    db.session.flush()
    row = Budget(installation_id=installation.id, scope_type="queue", scope_id="que_1", limit_amount=5)
    db.session.add(row)
    db.session.commit()
    db.session.execute(update(Budget).where(Budget.id == row.id).values(updated_at=LONG_AGO))
    db.session.commit()
    return row


def stamp(budget: Budget) -> datetime:
    db.session.expire_all()
    return db.session.get(Budget, budget.id).updated_at


def test_insert_sets_it(app):
    before = utcnow()
    installation = Installation(name="New", slug="new")
    db.session.add(installation)
    db.session.commit()
    row = Budget(installation_id=installation.id, scope_type="queue", scope_id="que_2", limit_amount=1)
    db.session.add(row)
    db.session.commit()
    assert stamp(row) >= before


def test_an_orm_change_stamps_it(budget):
    assert stamp(budget) == LONG_AGO
    before = utcnow()
    db.session.get(Budget, budget.id).limit_amount = 9
    db.session.commit()
    assert stamp(budget) >= before


def test_setting_the_same_value_writes_nothing(budget):
    db.session.get(Budget, budget.id).limit_amount = 5  # unchanged: no UPDATE, no new stamp
    db.session.commit()
    assert stamp(budget) == LONG_AGO


def test_a_core_update_stamps_it(budget):
    """A guarded UPDATE that does not name updated_at (the budget release) stamps it too."""
    before = utcnow()
    db.session.execute(
        update(Budget)
        .where(Budget.id == budget.id, Budget.used_amount >= 0)
        .values(used_amount=Budget.used_amount + 1)
        .execution_options(synchronize_session=False)
    )
    db.session.commit()
    assert stamp(budget) >= before


def test_a_value_the_statement_names_is_kept(budget):
    chosen = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    db.session.execute(update(Budget).where(Budget.id == budget.id).values(active=False, updated_at=chosen))
    db.session.commit()
    assert stamp(budget) == chosen


def test_raw_sql_is_not_stamped(budget):
    """onupdate is SQLAlchemy's, not a database trigger: hand-written SQL must set it."""
    db.session.execute(text("UPDATE budgets SET limit_amount = 7 WHERE id = :id"), {"id": budget.id})
    db.session.commit()
    assert stamp(budget) == LONG_AGO


def test_every_updated_at_column_is_stamped():
    columns = [table.c.updated_at for table in Base.metadata.sorted_tables if "updated_at" in table.c]
    assert len(columns) == 17  # with code labels (REV-3), connection health (CONN-1), bulk (BULK), queue subjects
    # (QUEUE), retention settings (OPS-4), statements of reasons (DSA-3)
    assert all(column.onupdate is not None and column.default is not None for column in columns)


def test_a_prebuilt_guarded_update_run_as_executemany_stamps_every_row(budget):
    """The proposal moves' prebuilt UPDATE (`statements.guarded_update`) names only what
    it changes; each row of an executemany gets its own stamp."""
    other = Budget(installation_id=budget.installation_id, scope_type="queue", scope_id="que_3", limit_amount=1)
    db.session.add(other)
    db.session.commit()
    db.session.execute(update(Budget).values(updated_at=LONG_AGO))
    db.session.commit()
    before = utcnow()
    statement = statements.guarded_update(Budget, "id", (("active", False),), ("limit_amount",))
    params = [{"k_id": row.id, "e_active": True, "v_limit_amount": 3} for row in (budget, other)]
    assert statements.run(db.session, statement, params).rowcount == 2
    db.session.commit()
    assert stamp(budget) >= before and stamp(other) >= before


def test_an_insert_that_does_not_name_it_sets_it(budget):
    """`insert_ignore` (Core INSERT ... ON CONFLICT DO NOTHING) fills the column's default."""
    before = utcnow()
    values = {"installation_id": budget.installation_id, "scope_type": "queue", "scope_id": "que_4", "limit_amount": 2}
    assert insert_ignore(db.session, Budget, values)
    db.session.commit()
    row = db.session.scalar(select(Budget).where(Budget.scope_id == "que_4"))
    assert row.updated_at >= before and row.created_at >= before


def test_a_proposal_move_stamps_it(app, world):
    """`move_proposal` does not name updated_at: onupdate stamps it, on both of its paths
    (a built statement, and the prebuilt one with `expect`)."""
    from ..builders import decide_report

    proposal = decide_report(world)
    for move, expect in ((Move.APPROVE, None), (Move.ENQUEUE_APPROVED, {"delivery_cycle": proposal.delivery_cycle})):
        db.session.execute(update(ActionProposal).where(ActionProposal.id == proposal.id).values(updated_at=LONG_AGO))
        before = utcnow()
        assert move_proposal(db.session, proposal.id, move, expect=expect)
        db.session.commit()
        db.session.expire_all()
        assert db.session.get(ActionProposal, proposal.id).updated_at >= before, move
