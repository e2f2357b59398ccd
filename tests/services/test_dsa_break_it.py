"""Break-it pass on issue 28 (DSA-3): a misbehaving Transparency Database.

Each test is an attack against the real submitter (`app.services.dsa.submission`),
the real database rows and a scripted database on loopback (`Scripted`): it answers
what the test tells it to, records what it received, and, when the test has not
scripted an answer, behaves as the documented database (`tests/tdb_server.py`).
The promise under attack: a statement is never lost nor created twice, the
submitter never raises out of the sweep, and the rows stay consistent.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from sqlalchemy import select
from werkzeug.wrappers import Request, Response

from app.domain.dsa_answers import read_batch_answer
from app.extensions import db
from app.models import DsaStatement
from app.services.dsa.sweep import MAX_HOLD_SECONDS, hold_of, submit_installation
from app.services.dsa.submission import TdbEndpoint, submit_pending
from tests.services.test_dsa_submission import pending_statements, states
from tests.tdb_server import TransparencyDatabase


class Scripted(TransparencyDatabase):
    """The documented database, except for the answers queued in `script`: each
    is (status, body bytes, headers) or a callable(request, puids) -> Response."""

    def __init__(self):
        super().__init__()
        self.script: list = []
        self.received: list[list[str]] = []
        self.release = threading.Event()

    def answer(self, request: Request) -> Response:
        if request.path.endswith("/statements"):
            payload = json.loads(request.get_data() or b"{}")
            puids = [s.get("puid") for s in payload.get("statements", [])]
            self.received.append(puids)
            if self.script:
                step = self.script.pop(0)
                if callable(step):
                    return step(request, puids)
                status, body, headers = step
                return Response(body, status, headers or {}, mimetype="application/json")
        return super().answer(request)


@pytest.fixture
def bad_tdb():
    server = Scripted().start()
    yield server
    server.release.set()
    server.close()


def _endpoint(server, **changes) -> TdbEndpoint:
    return TdbEndpoint(base_url=server.base_url, token="tdb-token", rate_limit_per_second=None, **changes)


def _rows() -> list[DsaStatement]:
    db.session.rollback()
    return list(db.session.scalars(select(DsaStatement).order_by(DsaStatement.created_at)))


def _eventually_all_submitted_once(world, server, puids):
    """The next runs, against the honest database, leave every statement submitted
    and each created exactly once."""
    for _ in range(3):
        submit_pending(world.installation_id, _endpoint(server))
    assert set(states().values()) == {"submitted"}
    assert set(server.statements) == set(puids)
    created = [p for call in server.batches() if call.status == 201 for p in call.puids]
    assert sorted(created) == sorted(set(created)), "a statement was created twice"


# -- 201 with a missing or garbage body ------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[1,2]", b'{"statements": "x"}', b'{"statements": [1, null, "x"]}'],
    ids=["empty", "not-json", "list", "string", "junk-items"],
)
def test_dsa3_a_201_with_a_garbage_body_counts_as_created_once(app, world, bad_tdb, body):
    """DSA-3 attack: the database answers 201 with a body that names nothing. The
    batch endpoint is all-or-nothing, so every statement is submitted (no uuid), and
    none is sent again."""
    puids = pending_statements(world, 3)
    bad_tdb.script.append((201, body, None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert (run.submitted, run.error) == (3, None)
    assert {r.state for r in _rows()} == {"submitted"} and {r.tdb_uuid for r in _rows()} == {None}
    assert submit_pending(world.installation_id, _endpoint(bad_tdb)).batches == 0
    assert bad_tdb.received == [puids]


@pytest.mark.parametrize(
    "item",
    [{"puid": ["a", "list"]}, {"puid": {"a": 1}}],
    ids=["puid-list", "puid-object"],
)
def test_dsa3_a_201_whose_items_carry_unhashable_puids_does_not_crash(app, world, bad_tdb, item):
    """DSA-3 attack: a 201 whose items' ``puid`` is a list or an object. Found:
    ``item.get("puid") in sent`` raised TypeError (unhashable) out of the submitter,
    leaving the batch claimed and the sweep failed. Fixed: such items are ignored."""
    pending_statements(world, 2)
    bad_tdb.script.append((201, json.dumps({"statements": [item]}).encode(), None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert run.submitted == 2
    assert {r.state for r in _rows()} == {"submitted"}


@pytest.mark.parametrize(
    "uuid_value",
    ["u" * 5000, {"nested": True}, ["x"], 12345, "nul\u0000uuid", ""],
    ids=["huge-string", "object", "list", "number", "nul", "empty"],
)
def test_dsa3_a_201_with_a_garbage_uuid_is_recorded_without_it(app, world, bad_tdb, uuid_value):
    """DSA-3 attack: a 201 whose ``uuid`` is 5,000 characters (the column holds 100),
    an object, a list, a number, a string with a NUL, empty. Found: the write failed
    (PostgreSQL: value too long, NUL in text; both: cannot bind an object), the
    submitter raised and the batch stayed claimed. Fixed: only 1..100 letters, digits
    and hyphens are kept as the uuid."""
    puids = pending_statements(world, 2)
    items = [{"puid": p, "uuid": uuid_value} for p in puids]
    bad_tdb.script.append((201, json.dumps({"statements": items}).encode(), None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert run.submitted == 2
    rows = _rows()
    assert {r.state for r in rows} == {"submitted"} and {r.tdb_uuid for r in rows} == {None}
    assert all(r.claim_token is None for r in rows)


@pytest.mark.parametrize(
    "status, body",
    [(200, b"<html>Maintenance</html>"), (202, b""), (204, b"")],
    ids=["200-maintenance-page", "202", "204"],
)
def test_dsa3_a_2xx_that_is_not_201_loses_no_statement(app, world, bad_tdb, status, body):
    """DSA-3 attack: the database's host answers 200 with a maintenance page (or 202,
    204) and creates nothing. Found: any 2xx marked every statement submitted, so
    these were lost. Fixed: only the documented 201 means created; anything else is
    resent after a wait and then created once."""
    puids = pending_statements(world, 3)
    bad_tdb.script.append((status, body, None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert (run.submitted, run.error) == (0, "tdb_unexpected_answer") and run.retry_after is not None
    assert {r.state for r in _rows()} == {"pending"} and all(r.claim_token is None for r in _rows())
    _eventually_all_submitted_once(world, bad_tdb, puids)


# -- 422 statement_N out of range, negative, non-numeric ---------------------------


@pytest.mark.parametrize(
    "key",
    ["statement_7", "statement_-1", "statement_x", "statement_", "statement_1.0", "statement_²", "statement_١"],
    ids=["out-of-range", "negative", "word", "empty", "decimal", "superscript", "arabic-indic"],
)
def test_dsa3_a_422_naming_a_statement_not_in_the_batch_dead_letters_nothing(app, world, bad_tdb, key):
    """DSA-3 attack: a 422 whose ``statement_N`` is out of range, negative, not a
    number or a Unicode digit. Found: ``statement_²`` passed `str.isdigit` and
    `int('²')` raised ValueError out of the submitter. Fixed: only ASCII decimal
    positions name a statement. Nothing is dead-lettered; the batch waits and is then
    created once."""
    puids = pending_statements(world, 3)
    body = {"errors": {key: {"content_date": ["The content date field is required."]}}}
    bad_tdb.script.append((422, json.dumps(body).encode(), None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert (run.dead_lettered, run.submitted, run.error) == (0, 0, "tdb_batch_refused")
    assert {r.state for r in _rows()} == {"pending"} and all(r.claim_token is None for r in _rows())
    _eventually_all_submitted_once(world, bad_tdb, puids)


def test_dsa3_a_422_with_a_huge_error_keeps_the_dead_letter(app, world, bad_tdb):
    """DSA-3 attack: a 422 for statement_0 whose error is 200 KB. The dead letter is
    kept with its error (a text column); the other statement is resent and created."""
    puids = pending_statements(world, 2)
    body = {"errors": {"statement_0": {"decision_facts": ["x" * 200_000]}}}
    bad_tdb.script.append((422, json.dumps(body).encode(), None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert (run.dead_lettered, run.submitted) == (1, 1)
    assert [r.state for r in _rows()] == ["dead_letter", "submitted"]
    assert set(bad_tdb.statements) == {puids[1]}


# -- existing_puids naming puids not sent ---------------------------------------------


def test_dsa3_existing_puids_naming_puids_not_sent_submits_only_those_sent(app, world, bad_tdb):
    """DSA-3 attack: ``existing_puids`` lists puids of another batch, of another
    installation and one of ours. Only ours is recorded as submitted; the rest are
    resent and created once."""
    puids = pending_statements(world, 3)
    body = {"errors": {"existing_puids": [puids[0], "someone-else", "other-install-123"]}}
    bad_tdb.statements[puids[0]] = bad_tdb._created({"puid": puids[0]})
    bad_tdb.script.append((422, json.dumps(body).encode(), None))
    submit_pending(world.installation_id, _endpoint(bad_tdb), max_batches=1)
    by_puid = {r.puid: r.state for r in _rows()}
    assert by_puid == {puids[0]: "submitted", puids[1]: "pending", puids[2]: "pending"}
    _eventually_all_submitted_once(world, bad_tdb, puids)


@pytest.mark.parametrize(
    "existing", [[["nested"]], [{"puid": "x"}], "a-string", {"a": 1}], ids=["lists", "objects", "string", "object"]
)
def test_dsa3_garbage_existing_puids_do_not_crash(app, world, bad_tdb, existing):
    """DSA-3 attack: ``existing_puids`` made of lists or objects, or not a list.
    Found: ``frozenset(existing)`` raised TypeError (unhashable) out of the
    submitter. Fixed: only strings count. Nothing is submitted; the batch waits."""
    pending_statements(world, 2)
    body = {"errors": {"existing_puids": existing}}
    bad_tdb.script.append((422, json.dumps(body).encode(), None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert run.submitted == 0 and run.retry_after is not None
    assert {r.state for r in _rows()} == {"pending"} and all(r.claim_token is None for r in _rows())


def test_dsa3_existing_puids_empty_after_the_intersection_waits(app, world, bad_tdb):
    """DSA-3 attack: ``existing_puids`` names only puids not sent. Nothing is recorded,
    and the run does not loop resending the batch: it stops and waits."""
    pending_statements(world, 2)
    body = json.dumps({"errors": {"existing_puids": ["nobody"]}}).encode()
    bad_tdb.script.extend([(422, body, None)] * 30)
    run = submit_pending(world.installation_id, _endpoint(bad_tdb), max_batches=30)
    assert run.batches <= 2, f"the run resent the same batch {run.batches} times"
    assert {r.state for r in _rows()} == {"pending"}


# -- 429 without Retry-After, with a huge one; 5xx -----------------------------------


@pytest.mark.parametrize(
    "headers, expected",
    [(None, 15.0), ({"Retry-After": "soon"}, 15.0), ({"Retry-After": "99999999999"}, MAX_HOLD_SECONDS)],
    ids=["missing", "garbage", "huge"],
)
def test_dsa3_a_429_holds_the_installation_for_a_bounded_time(app, world, bad_tdb, headers, expected):
    """DSA-3 attack: a 429 without Retry-After, with a garbage one, with a huge one.
    The run stops, statements stay pending and unclaimed, and the hold is bounded
    (default 15 s; at most an hour)."""
    pending_statements(world, 2)
    _tdb_connection(world, bad_tdb)
    bad_tdb.script.append((429, b"Limit Reached", headers))
    run = submit_installation(world.installation_id)
    assert run is not None and run.error == "tdb_rate_limited"
    held = hold_of(world.installation_id)
    assert held is not None
    assert 0 < held.until - time.time() <= expected + 1
    assert {r.state for r in _rows()} == {"pending"} and all(r.claim_token is None for r in _rows())


def _tdb_connection(world, server) -> None:
    """Put DSA settings in force whose Transparency Database connection points at
    `server` (`tests/services/test_dsa_sweep.tdb_connection`)."""
    from tests.services.test_dsa_sweep import tdb_connection

    tdb_connection(world, server)


# -- a redirect, a huge body, a hanging answer --------------------------------------------


def test_dsa3_a_redirect_to_another_host_is_not_followed(app, world, bad_tdb):
    """DSA-3 attack: the database answers 307 to another host. Egress follows no
    redirect: nothing goes elsewhere, the statements stay pending and are created
    once later."""
    other = Scripted().start()
    try:
        puids = pending_statements(world, 2)
        bad_tdb.script.append((307, b"", {"Location": other.base_url + "/statements"}))
        run = submit_pending(world.installation_id, _endpoint(bad_tdb))
        assert run.submitted == 0 and run.retry_after is not None
        assert other.received == [] and {r.state for r in _rows()} == {"pending"}
        _eventually_all_submitted_once(world, bad_tdb, puids)
    finally:
        other.close()


def test_dsa3_a_huge_422_body_is_not_read_and_nothing_is_lost(app, world, bad_tdb):
    """DSA-3 attack: a 422 whose body is larger than egress reads. Nothing is
    dead-lettered or submitted on an unread answer; the batch waits."""
    pending_statements(world, 2)
    big = app.config["EGRESS_MAX_RESPONSE_BYTES"] + 10
    bad_tdb.script.append((422, b'{"errors": {"statement_0": {"x": ["' + b"y" * big + b'"]}}}', None))
    run = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert (run.submitted, run.dead_lettered) == (0, 0) and run.retry_after is not None
    assert {r.state for r in _rows()} == {"pending"} and all(r.claim_token is None for r in _rows())


def test_dsa3_a_hanging_answer_times_out_and_is_resent_once_created(app, world, bad_tdb):
    """DSA-3 attack: the database creates the statements and then never answers
    (until the test ends). The run gives up after the connection's timeout, the
    statements stay pending, and the next run's resend is refused as existing
    puids: submitted, created once."""
    puids = pending_statements(world, 2)

    def create_then_hang(request, sent):
        for puid in sent:
            bad_tdb.statements[puid] = bad_tdb._created({"puid": puid})
        bad_tdb.release.wait(30)
        return Response(b"{}", 201)

    bad_tdb.script.append(create_then_hang)
    run = submit_pending(world.installation_id, _endpoint(bad_tdb, timeout_seconds=0.5))
    assert (run.submitted, run.error) == (0, "tdb_unavailable")
    assert {r.state for r in _rows()} == {"pending"} and all(r.claim_token is None for r in _rows())
    again = submit_pending(world.installation_id, _endpoint(bad_tdb))
    assert (again.submitted, again.answers) == (2, [422])
    assert set(bad_tdb.statements) == set(puids) and {r.state for r in _rows()} == {"submitted"}


# -- the sweep, and two submitters at once ----------------------------------------------


def test_dsa3_two_submitters_at_once_send_each_statement_once(app, world, bad_tdb):
    """DSA-3 attack: two submitters run at the same moment (the first one's request
    is held open until the second has claimed). Each statement is sent by one of
    them only and created once."""
    puids = pending_statements(world, 4)
    arrived = threading.Event()

    def hold_first(request, sent):
        arrived.set()
        bad_tdb.release.wait(10)
        return bad_tdb._store_many(request)

    bad_tdb.script.append(hold_first)
    results = {}

    def first():
        with app.app_context():
            results["first"] = submit_pending(world.installation_id, _endpoint(bad_tdb), batch_size=2)

    thread = threading.Thread(target=first)
    thread.start()
    assert arrived.wait(10)
    results["second"] = submit_pending(world.installation_id, _endpoint(bad_tdb), batch_size=2)
    bad_tdb.release.set()
    thread.join(20)
    sent = [p for batch in bad_tdb.received for p in batch]
    assert sorted(sent) == sorted(puids), "a statement was sent by both submitters"
    assert set(bad_tdb.statements) == set(puids)
    assert results["first"].submitted + results["second"].submitted == 4
    assert {r.state for r in _rows()} == {"submitted"}


def test_dsa3_a_poisoned_answer_does_not_stop_the_sweep(app, world, bad_tdb):
    """DSA-3 attack: whatever the database answers, `submit_installation` returns
    (the sweep's other steps run): read_batch_answer never raises on any JSON shape."""
    shapes = [
        {"errors": {"statement_²": {}}},
        {"errors": {"existing_puids": [[1]]}},
        {"errors": {"statement_0": None, "existing_puids": None}},
        {"errors": [1, 2]},
        {"statements": [{"puid": {"x": 1}, "uuid": []}]},
        {"statements": {"puid": "x"}},
        None,
        "string",
        12,
    ]
    for status in (201, 422):
        for shape in shapes:
            read_batch_answer(["a", "b"], status, json.dumps(shape).encode())
    pending_statements(world, 1)
    _tdb_connection(world, bad_tdb)
    bad_tdb.script.append((422, json.dumps({"errors": {"statement_²": {}}}).encode(), None))
    run = submit_installation(world.installation_id)
    assert run is not None and run.submitted == 0


# -- an insider: a restriction applied through another path ----------------------------


def test_dsa2_a_restriction_applied_as_a_compensation_gets_its_statement(app, world):
    """DSA-2 attack: after a takedown applied, a reviewer proposes its "compensation"
    with the restricting ``takedown`` component on another post, and an admin
    approves it. Found: a compensation was never a restriction to
    `statements._restricts`, so a takedown applied this way had no statement of
    reasons and no notice. Fixed: a compensation whose component declares a
    restriction is one (appeal corrections and temporary reversals still are not)."""
    from app.models import ActionProposal
    from app.services.lifecycle.compensation import propose_compensation
    from tests.builders import approve, decide_report, reload, run_worker, set_dsa_settings
    from tests.services.test_dsa_statements_built import applied_through_the_worker

    set_dsa_settings(world.installation_id)
    applied = applied_through_the_worker(app, world, decide_report(world))
    result = propose_compensation(
        applied.id,
        component_version_id=world.components["takedown"],
        action_code="takedown",
        target=dict(applied.target),
        payload=dict(applied.payload),
        idempotency_key="sneak-a-takedown",
        operator=world.user("reviewer"),
    )
    sneaked = db.session.get(ActionProposal, result.proposal_id)
    approve(world, sneaked, reviewer="admin")
    run_worker(app)
    assert reload(sneaked).state == "applied"
    statements = {r.proposal_id: r for r in _rows()}
    assert set(statements) == {applied.id, sneaked.id}, "a takedown applied without its statement of reasons"
    assert statements[sneaked.id].statement["decision_visibility"] == ["DECISION_VISIBILITY_CONTENT_REMOVED"]


# -- an insider: one admin alone ----------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"base_url": "/api/v1/../../elsewhere", "timeout_seconds": 30},  # same host, another path
        {"timeout_seconds": 120, "rate_limit_per_second": "10000"},  # only how it is sent
        {"bearer_token_action": "set", "bearer_token": "another-platforms-token"},
    ],
    ids=["path", "timeout-and-rate", "token"],
)
def test_dsa3_one_admin_cannot_change_where_statements_go(app, world, bad_tdb, change):
    """DSA-3, FOUR-4 attack: one admin edits the Transparency Database connection (its
    path on the same host, only its timeout and rate limit, its token). Each is a
    pending change that the same admin cannot approve; until a second admin does, the
    endpoint the submitter uses is the one in force."""
    from app.domain.errors import ApiError
    from app.models import Connection
    from app.services.admin.changes import PendingChange
    from app.services.admin.connection_settings import ConnectionSettings
    from app.services.admin.reviews import approve_change
    from app.services.dsa.connection import endpoint_status
    from app.services.dsa.settings import current_settings
    from tests.builders import make_operator

    _tdb_connection(world, bad_tdb)
    connection = db.session.scalar(select(Connection).where(Connection.slug == "tdb"))
    before = endpoint_status(db.session, world.installation_id, current_settings(db.session, world.installation_id))
    fields = {"base_url": bad_tdb.base_url, "allowed_hosts": "127.0.0.1", "bearer_token_action": "keep", **change}
    if fields["base_url"].startswith("/"):
        fields["base_url"] = bad_tdb.url + fields["base_url"]
    from app.services.admin.connections import create_connection_version

    admin = make_operator(world.installation_id, "admin")
    pending = create_connection_version(admin, connection.id, ConnectionSettings(**fields))
    assert isinstance(pending, PendingChange)
    with pytest.raises(ApiError) as refused:
        approve_change(admin, pending.change_id, pending.digest)
    assert refused.value.code == "maker_checker_violation"
    db.session.rollback()
    after = endpoint_status(db.session, world.installation_id, current_settings(db.session, world.installation_id))
    assert after.endpoint == before.endpoint


def test_dsa1_one_admin_cannot_put_dsa_settings_in_force(app, world):
    """DSA-1, FOUR-4 attack: one admin proposes settings that change what statements
    say (DSA on, another complaint window) and approves them alone: refused
    (``maker_checker_violation``); the settings in force are unchanged."""
    from app.demo_dsa import DEMO_DSA_SETTINGS
    from app.domain.errors import ApiError
    from app.services.admin.dsa_config import propose_settings, settings_in_force
    from app.services.admin.reviews import approve_change
    from tests.builders import make_operator

    before = settings_in_force(world.installation_id)
    admin = make_operator(world.installation_id, "admin")
    pending = propose_settings(admin, {**DEMO_DSA_SETTINGS, "complaint_window_days": 200})
    assert pending is not None
    with pytest.raises(ApiError) as refused:
        approve_change(admin, pending.change_id, pending.digest)
    assert refused.value.code == "maker_checker_violation"
    db.session.rollback()
    assert settings_in_force(world.installation_id) == before


# -- a misbehaving platform for the notify_user action ---------------------------------------


def _applied_with_notice(world, platform):
    """A takedown decided, approved and delivered with DSA on: applied, its statement
    built and its notice proposal queued in the same transaction (DSA-2, DSA-4)."""
    from app.services.dsa.notices import notice_of
    from app.services.lifecycle.dispatch import deliver
    from tests.builders import approve, decide_report, set_dsa_settings

    set_dsa_settings(world.installation_id)
    removal = decide_report(world)
    approve(world, removal)
    assert deliver(removal.id).state == "applied"
    db.session.rollback()
    notice = notice_of(db.session, db.session.get(type(removal), removal.id))
    assert notice is not None
    return removal, notice


def test_dsa4_a_platform_refusing_the_notice_then_taking_it_gets_it_once(app, world, platform):
    """DSA-4 attack: the platform answers 503 to the notice, then takes it; the worker
    retries once due. The user is notified once; the restriction and its statement are
    untouched; the notice is the same proposal (none created again)."""
    from app.models import ActionProposal
    from app.services.lifecycle.dispatch import deliver
    from tests.builders import make_due, pass_connection_waits, reload

    removal, notice = _applied_with_notice(world, platform)
    platform.state.configure(fail_next=1, fail_status=503)
    deliver(notice.id)
    assert reload(notice).state != "applied" and platform.state.notices == []
    make_due(notice)
    pass_connection_waits()
    assert deliver(notice.id).state == "applied"
    deliver(notice.id)  # delivered again: answered from its receipt, nothing new
    assert len(platform.state.notices) == 1
    assert reload(removal).state == "applied" and [r.state for r in _rows()] == ["pending"]
    db.session.rollback()
    kinds = db.session.scalars(select(ActionProposal.operation_id).where(ActionProposal.run_id == removal.run_id))
    assert sum(1 for op in kinds if op.startswith("notice:")) == 1


def test_dsa4_a_platform_refusing_the_notice_for_good_loses_no_statement(app, world, platform):
    """DSA-4 attack: the platform refuses the notice with a 400 (terminal). The notice
    fails, visibly; the restriction stays applied and its statement stays pending for
    the Transparency Database (a failed notice never takes the statement with it)."""
    from app.services.lifecycle.dispatch import deliver
    from tests.builders import reload

    removal, notice = _applied_with_notice(world, platform)
    platform.state.configure(fail_next=1, fail_status=400)
    deliver(notice.id)
    assert reload(notice).state == "failed" and platform.state.notices == []
    assert reload(removal).state == "applied"
    [row] = _rows()
    assert (row.state, row.notice_proposal_id) == ("pending", notice.id)


def test_dsa4_a_platform_confirming_the_restriction_twice_makes_one_statement_and_one_notice(app, world, platform):
    """DSA-2, DSA-4 attack: the platform accepts the takedown, then confirms it applied
    twice through the result API (the second a replay). While only accepted, no
    statement and no notice exist; then one statement, one notice proposal, one
    notice delivered; the replay changes nothing."""
    from app.models import ActionProposal
    from app.services.dsa.notices import notice_of
    from app.services.lifecycle.dispatch import deliver
    from app.services.lifecycle.receipt_intake import accept_async_result
    from tests.builders import approve, decide_report, reload, set_dsa_settings

    set_dsa_settings(world.installation_id)
    removal = decide_report(world)
    approve(world, removal)
    platform.state.configure(mode="async", console_url=None)
    assert deliver(removal.id).state == "queued"  # accepted, waiting for the platform
    row = reload(removal)
    assert notice_of(db.session, row) is None and _rows() == []  # nothing before it applied
    result = {"action_id": row.id, "operation_id": row.operation_id, "payload_digest": row.payload_digest,
              "status": "applied"}  # fmt: skip
    first = accept_async_result(result, world.integration_id)
    second = accept_async_result(result, world.integration_id)
    assert (first.state, first.idempotent_replay, second.idempotent_replay) == ("applied", False, True)
    assert len(_rows()) == 1
    notice = notice_of(db.session, db.session.get(ActionProposal, removal.id))
    platform.state.configure(mode="sync")
    assert deliver(notice.id).state == "applied"
    notices = db.session.scalars(select(ActionProposal.operation_id).where(ActionProposal.run_id == removal.run_id))
    assert sum(1 for op in notices if op.startswith("notice:")) == 1
    assert len(platform.state.notices) == 1
