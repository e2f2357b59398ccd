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


def test_the_subject_aggregate_matches_its_sql_twin_QUEUE_1(app):
    """QUEUE-1: the subject row the database computes is the one the domain computes
    from every report (states, ties in time, empty texts, many summaries)."""
    import random

    from app.domain.queue import ReportFacts, aggregate
    from app.models import Report, ReportEvidence, ReportTarget
    from app.models.queue import aggregate_sql
    from app.services.cases.reports import intake_report

    team = make_team()
    other = Queue(installation_id=team.installation_id, name="Other", slug="other")
    db.session.add(other)
    db.session.commit()
    chance = random.Random(25)
    base = utcnow() - timedelta(days=1)
    for n in range(40):
        evidence = chance.choice([None, {"content_text": f"text {n}"}, {"author_reference": "user:9",
                                                                          "author_name": f"name{n}"}])
        target = {"reference": "post:agg", **({"evidence": evidence} if evidence else {})}
        intake_report({"external_id": f"agg-{n}", "targets": [target], "queue": chance.choice(["general", "other"]),
                       "category": chance.choice(["", "spam", "abuse"]), "reason": chance.choice(["", "r1", "r2"]),
                       "summary": chance.choice(["", f"summary {n}"])}, team.integration_id)
    db.session.rollback()
    reports = db.session.scalars(select(Report)).all()
    for report in reports:  # some share a moment; some are decided
        report.created_at = base + timedelta(minutes=chance.randrange(10))
        report.state = chance.choice(["open", "decided"])
    db.session.commit()
    subject_id = reports[0].subject_id
    facts = []
    for report in db.session.scalars(select(Report)).all():
        found = db.session.scalar(select(ReportEvidence).join(ReportTarget, ReportTarget.id == ReportEvidence.report_target_id)
                                  .where(ReportTarget.report_id == report.id, ReportTarget.position == 0))
        facts.append(ReportFacts(report.created_at, report.state == "open", report.queue_id, report.category,
                                 report.reason, report.summary, found and found.content_text,
                                 found and found.author_reference, found and found.author_name, report.id))
    assert aggregate_sql(db.session, subject_id) == aggregate(facts)
