"""Relationships are for reading, loaded only when a query asks for them."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.orm import joinedload, selectinload

from app.extensions import db
from app.models import ActionProposal, Base, Report

from ..builders import decide_report
from ..web.test_query_counts import counting, grow_history


def test_an_unloaded_relationship_raises_instead_of_querying(app, world):
    """A page that forgot to load related rows fails in its tests, not with a query per row."""
    proposal = decide_report(world)
    db.session.expire_all()
    row = db.session.scalar(select(ActionProposal).where(ActionProposal.id == proposal.id))
    with pytest.raises(InvalidRequestError, match="lazy='raise'"):
        row.report  # noqa: B018


def test_related_rows_come_with_the_query_that_names_them(app, world):
    proposal_id = decide_report(world).id
    expected = db.session.get(ActionProposal, proposal_id).report_id
    db.session.expire_all()
    with counting(app) as statements:
        row = db.session.scalar(
            select(ActionProposal)
            .where(ActionProposal.id == proposal_id)
            .options(joinedload(ActionProposal.report).selectinload(Report.targets), joinedload(ActionProposal.task))
        )
        seen = (row.report.id, [t.position for t in row.report.targets], row.task.state)
    assert len(statements) == 2  # the proposal with its report and task, then the targets
    assert seen == (expected, [0], "open")
    assert row.task.action_proposal_id == row.id


def test_relationships_are_view_only():
    """Rows are written by id through the services; no relationship writes a column."""
    relationships = [r for mapper in Base.registry.mappers for r in mapper.relationships]
    assert relationships
    assert all(r.viewonly and r.lazy == "raise" for r in relationships)


def test_attempts_and_receipts_come_in_order(app, world):
    """The proposal page lists attempts by cycle and number, receipts by arrival."""
    proposal = decide_report(world)
    grow_history(world, proposal, 6)  # cycles 1, 2, 3, 1, 2, 3
    db.session.expire_all()
    row = db.session.scalar(
        select(ActionProposal)
        .where(ActionProposal.id == proposal.id)
        .options(selectinload(ActionProposal.attempts), selectinload(ActionProposal.receipts))
    )
    assert [(a.delivery_cycle, a.attempt_number) for a in row.attempts] == [
        (1, 100),
        (1, 103),
        (2, 101),
        (2, 104),
        (3, 102),
        (3, 105),
    ]
    assert [r.attempt_number for r in row.receipts] == [0, 1, 2, 3, 4, 5]
