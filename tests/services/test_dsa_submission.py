"""Submitting statements of reasons to the Transparency Database on loopback
(app/services/dsa/submission.py, SPEC DSA-3)."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import insert, select, update

from app.domain.clock import utcnow
from app.domain.dsa import build_statement, puid_for
from app.domain.dsa_answers import StatementMove, StatementState
from app.extensions import db
from app.models import ActionProposal, AuditEvent, DsaStatement, new_id
from app.models.dsa import move_statements
from app.services.dsa.submission import TdbEndpoint, submit_pending
from app.services.uow import unit_of_work
from tests.builders import decide_report
from tests.dsa_examples import facts


def pending_statements(world, count: int, *, broken: set[int] = frozenset()) -> list[str]:
    """`count` proposals (one real, the rest copies of its row) and a pending
    statement for each; the statements at the `broken` positions lack their
    content date. Returns the puids in creation order."""
    first = decide_report(world)
    table = ActionProposal.__table__
    row = dict(db.session.execute(select(table).where(table.c.id == first.id)).mappings().one())
    ids = [first.id] + [f"{first.id}-{n}" for n in range(1, count)]
    copies = [{**row, "id": pid, "operation_id": f"{row['operation_id']}-{n}"} for n, pid in enumerate(ids[1:], 1)]
    if copies:
        db.session.execute(insert(table), copies)
    rows = []
    for n, pid in enumerate(ids):
        statement = build_statement(facts(pid, content_date=None if n in broken else facts().content_date))
        rows.append(
            {
                "id": new_id("sor"),
                "installation_id": world.installation_id,
                "proposal_id": pid,
                "puid": puid_for(pid),
                "statement": statement,
                "state": StatementState.PENDING.value,
                "attempts": 0,
                "created_at": first.created_at + timedelta(seconds=n),
                "updated_at": first.created_at,
                "applied_at": first.created_at,
                "complaint_until": first.created_at + timedelta(days=183),
            }
        )
    db.session.execute(insert(DsaStatement), rows)
    db.session.commit()
    return [r["puid"] for r in rows]


def endpoint(tdb, **changes) -> TdbEndpoint:
    return TdbEndpoint(base_url=tdb.base_url, token="tdb-token", **changes)


def states() -> dict[str, str]:
    db.session.rollback()
    return dict(db.session.execute(select(DsaStatement.puid, DsaStatement.state)).all())


def test_250_statements_go_in_3_batches_once_each(app, world, tdb):
    """DSA-3: batches of at most 100; every statement created once."""
    puids = pending_statements(world, 250)
    run = submit_pending(world.installation_id, endpoint(tdb))
    assert (run.batches, run.submitted, run.dead_lettered, run.retry_after) == (3, 250, 0, None)
    assert [call.count for call in tdb.batches()] == [100, 100, 50]
    sent = [puid for call in tdb.batches() for puid in call.puids]
    assert sorted(sent) == sorted(puids) and len(set(sent)) == 250
    assert set(tdb.statements) == set(puids)
    assert set(states().values()) == {"submitted"}
    rows = db.session.scalars(select(DsaStatement)).all()
    assert all(r.attempts == 1 and r.submitted_at and r.claim_token is None for r in rows)
    assert {r.tdb_uuid for r in rows} == {tdb.statements[r.puid]["uuid"] for r in rows}
    again = submit_pending(world.installation_id, endpoint(tdb))
    assert again.batches == 0 and len(tdb.batches()) == 3


def test_a_429_is_retried_later(app, world, tdb):
    """DSA-3: a 429 sends nothing more this run and asks to wait; the next run
    submits every statement, once."""
    puids = pending_statements(world, 30)
    tdb.force_429(1, retry_after=3)
    first = submit_pending(world.installation_id, endpoint(tdb))
    assert (first.batches, first.submitted, first.retry_after, first.error) == (1, 0, 3.0, "tdb_rate_limited")
    assert set(states().values()) == {"pending"}
    assert tdb.statements == {}
    second = submit_pending(world.installation_id, endpoint(tdb))
    assert (second.batches, second.submitted, second.retry_after) == (1, 30, None)
    assert set(tdb.statements) == set(puids)
    rows = db.session.scalars(select(DsaStatement)).all()
    assert {r.attempts for r in rows} == {2}  # sent twice: refused by the limit, then created


def test_an_invalid_statement_is_dead_lettered_and_the_rest_resent(app, world, tdb):
    """DSA-3: a batch refused for one statement (statement_N) keeps that one as a
    dead letter with its error; the others are sent again and created."""
    puids = pending_statements(world, 40, broken={7})
    run = submit_pending(world.installation_id, endpoint(tdb))
    assert (run.submitted, run.dead_lettered, run.retry_after) == (39, 1, None)
    assert [call.status for call in tdb.batches()] == [422, 201]
    assert tdb.batches()[1].count == 39
    assert set(tdb.statements) == set(puids) - {puids[7]}
    dead = db.session.scalar(select(DsaStatement).where(DsaStatement.puid == puids[7]))
    assert dead.state == "dead_letter"
    assert json.loads(dead.last_error) == {"content_date": ["The content date field is required."]}
    assert submit_pending(world.installation_id, endpoint(tdb)).batches == 0  # a dead letter is not resent
    audit = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "dsa.batch_answered")).all()
    assert sorted(json.loads(a.details_json)["dead_lettered"] for a in audit) == [0, 1]


def test_a_duplicate_puid_counts_as_submitted(app, world, tdb):
    """DSA-3: a statement the database already holds (its answer was lost) is
    submitted, not created again; the rest of its batch is resent and created."""
    puids = pending_statements(world, 10)
    created = tdb._created({"puid": puids[3]})
    tdb.statements[puids[3]] = created  # created by an earlier send whose answer never came
    run = submit_pending(world.installation_id, endpoint(tdb))
    assert (run.submitted, run.dead_lettered) == (10, 0)
    assert [call.status for call in tdb.batches()] == [422, 201]
    assert tdb.statements[puids[3]] is created
    assert set(states().values()) == {"submitted"}
    row = db.session.scalar(select(DsaStatement).where(DsaStatement.puid == puids[3]))
    assert row.last_error == "tdb_existing_puid"


def test_a_claimed_statement_is_not_sent_by_another_run(app, world, tdb):
    """DSA-3: statements held by a live claim are not claimed again, and an outcome
    is written only under the claim that sent it."""
    pending_statements(world, 5)
    with unit_of_work() as uow:
        ids = list(uow.session.scalars(select(DsaStatement.id)))
        held = {"claim_token": "other", "claimed_until": utcnow() + timedelta(hours=1)}
        uow.session.execute(update(DsaStatement).values(held))
        uow.commit()
    assert submit_pending(world.installation_id, endpoint(tdb)).batches == 0
    with unit_of_work() as uow:
        assert move_statements(uow.session, ids, StatementMove.SUBMIT, claim_token="mine") == set()
        assert move_statements(uow.session, ids, StatementMove.SUBMIT, claim_token="other") == set(ids)
        assert move_statements(uow.session, ids, StatementMove.DEAD_LETTER) == set()  # not from submitted
        uow.commit()
    assert tdb.batches() == []


def test_the_submitter_stays_under_the_rate_limit(app, world, tdb):
    """DSA-3, CONN-2: with the database allowing 2 requests a second, a submitter
    limited to 1 a second sends 3 batches without a 429 (without its limit the third
    request of the same second would be refused)."""
    pending_statements(world, 6)
    tdb.per_second = 2
    tdb.tokens.add("second-token")
    unlimited = endpoint(tdb, rate_limit_per_second=None)
    assert submit_pending(world.installation_id, unlimited, max_batches=3, batch_size=1).answers == [201, 201, 429]
    limited = TdbEndpoint(base_url=tdb.base_url, token="second-token", rate_limit_per_second=1.0)
    run = submit_pending(world.installation_id, limited, max_batches=3, batch_size=1)
    assert run.answers == [201, 201, 201]
    assert len(tdb.statements) == 5


def test_a_dead_submitters_claim_runs_out_and_nothing_is_created_twice(app, world, tdb):
    """DSA-3: a submitter that sent its batch and died before recording the answer
    leaves its claim; once the lease ran out the next run sends the batch again, the
    database refuses the puids as existing, and they are recorded as submitted."""
    puids = pending_statements(world, 4)
    for puid in puids:
        tdb.statements[puid] = tdb._created({"puid": puid})  # what the dead submitter's request created
    with unit_of_work() as uow:
        held = {"claim_token": "dead", "claimed_until": utcnow() - timedelta(seconds=1)}
        uow.session.execute(update(DsaStatement).values(held))
        uow.commit()
    run = submit_pending(world.installation_id, endpoint(tdb))
    assert (run.batches, run.submitted, run.answers) == (1, 4, [422])
    assert set(states().values()) == {"submitted"} and len(tdb.statements) == 4


def test_a_wrong_token_sends_again_later(app, world, tdb):
    """DSA-3: a 401 changes no statement's state; the run stops and says why."""
    pending_statements(world, 3)
    run = submit_pending(world.installation_id, TdbEndpoint(base_url=tdb.base_url, token="nope"))
    assert (run.submitted, run.error) == (0, "tdb_unauthorized")
    assert set(states().values()) == {"pending"}
