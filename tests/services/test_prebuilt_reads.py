"""Reads whose statements are built once with bound and expanding parameters (issue
25) keep tenants apart and take empty and long lists (from the break-it pass)."""

from __future__ import annotations


from app.extensions import db
from app.services.read.console import proposal_detail
from app.services.read.review import Subject, evidence_by_report, subject_history, undo_marks
from app.services.read.task_list import task_page
from app.services.read.pagination import encode_cursor
from app.services.lifecycle.maker_lookup import maker_facts

from ..builders import make_proposal, make_team


def test_prebuilt_reads_keep_tenants_apart_and_take_empty_lists(app, team):
    """REC-2, REV-2, FOUR-1: another installation's proposal is not found, with or without
    ``?audit=all``; empty id lists read nothing."""
    other = make_team()
    theirs = make_proposal(other)
    mine = make_proposal(team)
    assert proposal_detail(team.user("reviewer"), theirs.id) is None
    assert proposal_detail(team.user("reviewer"), theirs.id, all_audit=True) is None
    assert proposal_detail(team.user("reviewer"), mine.id, all_audit=True) is not None
    assert evidence_by_report([]) == {} and undo_marks([]) == {} and maker_facts(db.session, []) == {}
    assert subject_history(team.installation_id, mine.report_id, Subject([], [])) == []
    target = theirs.target if isinstance(theirs.target, str) else None
    refs = [r for r in (target, theirs.report_id) if r]
    assert subject_history(team.installation_id, mine.report_id, Subject(refs, refs)) == []
    assert undo_marks([f"x{i}" for i in range(5000)]) == {}
    # a cursor forged to point at the other installation's task reads only this one's
    from app.models import HumanTask
    task = db.session.query(HumanTask).filter_by(installation_id=other.installation_id).first()
    assert task is not None
    if task is not None:
        page = task_page(team.user("reviewer"), encode_cursor(task.due_at or task.created_at, task.id))
        assert theirs.id not in repr(page.rows) and task.id not in repr(page.rows)
        assert len(page.rows) == task_page(team.user("reviewer")).total
