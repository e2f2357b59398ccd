"""Dead letters (CONN-4): terminal failures grouped by connection and error code, retried
in bulk behind the digest of the exact list, each in its own delivery cycle (RTRY)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.dead_letters import list_digest
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, AuditEvent, ComponentVersion, Connection
from app.queueing import delivery_queue
from app.services.lifecycle.dead_letter_retry import DeadLetterFilter, retry_dead_letters
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.retry import retry_proposal
from app.services.read.operations import dead_letters

from ..builders import applied, make_proposal, make_team, reload, set_row


@pytest.fixture
def team(app, platform):
    return make_team(platform)


@pytest.fixture
def second_connection(team):
    """A second connection: the team's restore component is delivered through it."""
    from app.services.admin.connection_create import create_connection
    from app.services.admin.connections import ConnectionSettings

    proposed = create_connection(
        team.user("admin"),
        name="Other API",
        slug="other-api",
        integration_id=None,
        settings=ConnectionSettings(
            base_url=team.platform.url,
            bearer_token_action="none",
            signing_secret_action="none",
            timeout_seconds=5,
            allowed_hosts="127.0.0.1 localhost",
        ),
    )
    saved = applied(proposed, team.installation_id)  # FOUR-4: a second admin approves it
    set_row(ComponentVersion, team.components["restore"], connection_version_id=saved["version_id"])
    return saved


def connection_of(team) -> str:
    db.session.rollback()
    return db.session.scalar(select(Connection.id).where(Connection.installation_id == team.installation_id))


def failed(team, n: int = 1, **kwargs) -> list[ActionProposal]:
    """`n` proposals that failed for good (a 400: platform_client_error)."""
    return [make_proposal(team, state="failed", **kwargs) for _ in range(n)]


def audit_count(action: str) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(AuditEvent).where(AuditEvent.action == action))


def bulk(team, where=None, digest=None, key="bulk-1", ids=None, who="reviewer"):
    where = where or DeadLetterFilter()
    if digest is None:
        digest = dead_letters(team.installation_id, where).digest
    return retry_dead_letters(team.user(who), where=where, list_digest=digest, idempotency_key=key, proposal_ids=ids)


def test_conn4_dead_letters_are_grouped_by_connection_and_error_code(app, team, second_connection):
    """CONN-4: Operations lists terminal failures by connection and error code; what
    is not terminal (will retry, applied) is not a dead letter."""
    a, b, c = failed(team, 3)
    set_row(ActionProposal, c.id, last_error_code="platform_server_error")
    d = failed(team)[0]
    set_row(ActionProposal, d.id, component_version_id=team.components["restore"])
    make_proposal(team, state="failed", terminal=False)  # will retry
    make_proposal(team, state="applied")
    first = connection_of(team)
    view = dead_letters(team.installation_id)
    groups = {(g.connection_name, g.error_code): g.count for g in view.groups}
    assert groups == {
        ("Platform API", "platform_client_error"): 2,
        ("Platform API", "platform_server_error"): 1,
        ("Other API", "platform_client_error"): 1,
    }
    assert {x.proposal.id for x in view.listed} == {a.id, b.id, c.id, d.id} and view.matching == 4 == view.total
    only = dead_letters(team.installation_id, DeadLetterFilter(first, "platform_client_error"))
    assert {x.proposal.id for x in only.listed} == {a.id, b.id} and only.matching == 2
    assert only.digest == list_digest([(a.id, 1), (b.id, 1)])
    other = dead_letters(team.installation_id, DeadLetterFilter(second_connection["connection_id"]))
    assert [x.proposal.id for x in other.listed] == [d.id]


def test_conn4_retry_all_matching_gives_each_its_own_cycle_and_audit_row(app, team):
    """CONN-4, RTRY-2: every listed proposal gets a new delivery cycle, its own
    `action.retry_requested` row and a delivery job; the bulk request has one row."""
    proposals = failed(team, 3)
    jobs = delivery_queue(app).count
    result = bulk(team, DeadLetterFilter(connection_of(team), "platform_client_error"))
    assert sorted(result.retried) == sorted(p.id for p in proposals) and result.refused == {}
    assert not result.idempotent_replay
    for proposal in proposals:
        row = reload(proposal)
        assert (row.state, row.delivery_cycle, row.cycle_start_attempt, row.delivery_terminal) == (
            "queued",
            2,
            1,
            False,
        )
    rows = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "action.retry_requested")).all()
    assert sorted(r.target_id for r in rows) == sorted(p.id for p in proposals)
    assert all(r.details["delivery_cycle"] == 2 and r.actor_id == team.user("reviewer").id for r in rows)
    [row] = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "dead_letters.retry_requested")).all()
    assert sorted(row.details["retried"]) == sorted(result.retried)
    assert delivery_queue(app).count == jobs + 3
    for proposal in proposals:  # the platform works now: each new cycle applies
        assert deliver(proposal.id).state == "applied"
    assert dead_letters(team.installation_id).listed == []


def test_conn4_retry_selected_retries_only_those(app, team):
    """CONN-4: a selection of the listed dead letters; the others stay listed."""
    a, b, c = failed(team, 3)
    result = bulk(team, ids=[a.id, c.id])
    assert sorted(result.retried) == sorted([a.id, c.id])
    assert (reload(a).delivery_cycle, reload(b).delivery_cycle, reload(c).delivery_cycle) == (2, 1, 2)
    assert [x.proposal.id for x in dead_letters(team.installation_id).listed] == [b.id]


@pytest.mark.parametrize("change", ["another_failed", "one_retried_alone"])
def test_conn4_a_changed_list_is_refused_and_nothing_changes(app, team, change):
    """CONN-4: the digest confirms the exact list; when the matching set changed,
    409 dead_letters_changed and no proposal, audit row or job is added."""
    a, b = failed(team, 2)
    digest = dead_letters(team.installation_id).digest
    if change == "another_failed":
        failed(team)
    else:  # retried alone and failed again: same ids, another cycle
        retry_proposal(b.id, payload_digest=b.payload_digest, idempotency_key="alone", operator=team.user("admin"))
        team.platform.state.configure(fail_next=1, fail_status=400)
        deliver(b.id)
        assert reload(b).delivery_terminal and reload(b).delivery_cycle == 2
    before = (audit_count("action.retry_requested"), delivery_queue(app).count)
    with pytest.raises(ApiError) as caught:
        bulk(team, digest=digest)
    assert (caught.value.status, caught.value.code) == (409, "dead_letters_changed")
    assert reload(a).delivery_cycle == 1 and reload(a).delivery_terminal
    assert (audit_count("action.retry_requested"), delivery_queue(app).count) == before
    assert audit_count("dead_letters.retry_requested") == 0


def test_conn4_a_replayed_bulk_retry_does_nothing_twice(app, team):
    """CONN-4, RTRY-3: the same request twice answers the first result and retries
    nothing again; the key with another request, or by another operator, is 409."""
    proposals = failed(team, 2)
    digest = dead_letters(team.installation_id).digest
    first = bulk(team, digest=digest)
    counts = (audit_count("action.retry_requested"), audit_count("dead_letters.retry_requested"))
    jobs = delivery_queue(app).count
    again = bulk(team, digest=digest)
    assert again.idempotent_replay and sorted(again.retried) == sorted(first.retried)
    assert (audit_count("action.retry_requested"), audit_count("dead_letters.retry_requested")) == counts == (2, 1)
    assert delivery_queue(app).count == jobs
    assert all(reload(p).delivery_cycle == 2 for p in proposals)
    for other in (dict(digest="sha256:" + "0" * 64), dict(digest=digest, who="admin")):
        with pytest.raises(ApiError) as caught:
            bulk(team, **other)
        assert (caught.value.status, caught.value.code) == (409, "idempotency_key_reused")


def test_conn4_two_identical_requests_at_once_retry_once(app, team):
    """CONN-4: a double submit racing itself: one retries, the other replays."""
    from concurrent.futures import ThreadPoolExecutor

    proposals = failed(team, 3)
    digest = dead_letters(team.installation_id).digest
    operator_id = team.user("reviewer").id

    def attempt(_):
        with app.app_context():
            from app.models import OperatorUser

            operator = db.session.get(OperatorUser, operator_id)
            try:
                result = retry_dead_letters(
                    operator, where=DeadLetterFilter(), list_digest=digest, idempotency_key="double"
                )
                return ("replay" if result.idempotent_replay else "retried", len(result.retried))
            except ApiError as error:
                return (error.code, 0)
            finally:
                db.session.remove()

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = sorted(pool.map(attempt, range(2)))
    assert results == [("replay", 3), ("retried", 3)], results
    assert all(reload(p).delivery_cycle == 2 for p in proposals)
    assert audit_count("action.retry_requested") == 3 and audit_count("dead_letters.retry_requested") == 1


def test_conn4_proposals_rtry_refuses_stay_listed(app, team):
    """CONN-4, RTRY-1: one whose authorization expired is refused with its code and
    stays a dead letter; the others are retried."""
    a, b = failed(team, 2)
    set_row(ActionProposal, a.id, expires_at=utcnow() - timedelta(seconds=1))
    result = bulk(team)
    assert result.retried == [b.id] and result.refused == {a.id: "action_approval_expired"}
    assert [x.proposal.id for x in dead_letters(team.installation_id).listed] == [a.id]
    assert audit_count("action.retry_requested") == 1


def test_conn4_only_listed_proposals_can_be_selected(app, team):
    """CONN-4: a selection outside the confirmed list is refused, nothing retried."""
    (a,) = failed(team)
    other = make_proposal(team, state="failed", terminal=False)
    for ids, code in (([a.id, other.id], "dead_letter_not_listed"), ([], "dead_letters_none_selected")):
        with pytest.raises(ApiError) as caught:
            bulk(team, ids=ids, key=f"k-{code}")
        assert (caught.value.status, caught.value.code) == (400, code)
    assert reload(a).delivery_cycle == 1 and audit_count("action.retry_requested") == 0


def test_conn4_dead_letters_of_another_installation_are_not_listed(app, team, platform):
    """CONN-4: an operator lists and retries only their installation's dead letters."""
    mine = failed(team)
    other_team = make_team(platform)
    failed(other_team)
    assert [x.proposal.id for x in dead_letters(team.installation_id).listed] == [mine[0].id]
    assert bulk(team).retried == [mine[0].id]


def test_conn4_metric_counts_dead_letters_by_connection(app, team, client):
    """CONN-4: /metrics exports dead letters by connection."""
    failed(team, 2)
    text = client.get("/metrics").get_data(as_text=True)
    line = next(line for line in text.splitlines() if line.startswith("console_dead_letters{"))
    assert f'connection_id="{connection_of(team)}"' in line and line.endswith(" 2.0")
