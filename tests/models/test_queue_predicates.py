"""Each queue rule and its SQL twin agree (SPEC QUEUE-2, QUEUE-4), on both backends."""

from __future__ import annotations

import itertools
from datetime import timedelta

from sqlalchemy import select

from app.domain.clock import utcnow
from app.domain.queue import claim_active, claim_blocks, is_overdue
from app.extensions import db
from app.models import Queue, ReportSubject, claim_active_sql, claim_blocks_sql, overdue_sql
from app.models.base import new_id
from tests.builders import make_operator, make_team


def test_claim_rules_match_their_sql_twins_QUEUE_2(app):
    team = make_team()
    me = make_operator(team.installation_id).id
    other = make_operator(team.installation_id, "reviewer").id
    now = utcnow()
    cases = list(itertools.product([None, me, other], [None, now - timedelta(minutes=1), now + timedelta(minutes=1)]))
    for holder, until in cases:
        db.session.add(ReportSubject(id=new_id("sub"), installation_id=team.installation_id,
                                     reference=f"post:{holder}-{until}", waiting_since=now, first_reported_at=now,
                                     last_reported_at=now, claimed_by_id=holder, claimed_until=until))
    db.session.commit()
    rows = db.session.scalars(select(ReportSubject)).all()
    active = set(db.session.scalars(select(ReportSubject.id).where(claim_active_sql(now))))
    blocks = set(db.session.scalars(select(ReportSubject.id).where(claim_blocks_sql(me, now))))
    assert active == {r.id for r in rows if claim_active(r.claimed_by_id, r.claimed_until, now)}
    assert blocks == {r.id for r in rows if claim_blocks(r.claimed_by_id, r.claimed_until, me, now)}
    assert len(blocks) == 1 and 0 < len(active) < len(rows)


def test_overdue_matches_its_sql_twin_QUEUE_4(app):
    team = make_team()
    now = utcnow()
    timed = Queue(installation_id=team.installation_id, name="Timed", slug="timed", decide_within_seconds=600)
    db.session.add(timed)
    db.session.flush()
    queues = {None: None, team.queue_id: None, timed.id: 600}
    for (queue_id, _target), state, minutes in itertools.product(queues.items(), ["open", "done"], [1, 9, 11, 60]):
        db.session.add(ReportSubject(id=new_id("sub"), installation_id=team.installation_id, state=state,
                                     reference=f"post:{queue_id}-{state}-{minutes}", queue_id=queue_id,
                                     waiting_since=now - timedelta(minutes=minutes), first_reported_at=now,
                                     last_reported_at=now))
    db.session.commit()
    rows = db.session.scalars(select(ReportSubject)).all()
    late = set(db.session.scalars(select(ReportSubject.id).where(overdue_sql(now, {timed.id: 600}))))
    assert late == {r.id for r in rows if is_overdue(r.state, r.waiting_since, queues[r.queue_id], now)}
    assert len(late) == 2
    assert db.session.scalars(select(ReportSubject.id).where(overdue_sql(now, {}))).all() == []
