"""Issue 28's "Done when": a history of 500 decisions applied through the real pipeline
yields 500 valid statements of reasons (DSA-2), submitted once each in batches of at
most 100 through a 429 and a batch holding one invalid statement (DSA-3), and the
transparency report of the period equals what this test counted itself (DSA-6).

The history, in one installation (the demo's, DSA on), every restriction delivered by
the worker to the demo platform on loopback, whose applied receipt writes the statement:

* human: a moderator decides ``remove_content`` (take the post down) or
  ``suspend_account`` (the demo's temporary suspension: it has an end date) on a
  platform's report; the workflow proposes; a reviewer approves → partially automated;
* automated: ``remove_spam`` through a bounded-automation workflow (made here through
  the admin services, approved by a second admin, with its budget) → fully automated;
* bulk: two batches of 100 pasted posts, one through the human workflow
  (``remove_content``), one through the automated one (``remove_spam``: a batch's items
  always wait for a person), each approved by a second person: a moderator chose each
  subject → not automated;
* appeals: some human decisions appealed by the platform and decided ``reversed``
  through the appeal service (their corrections approved and applied: a restore is no
  restriction, so no statement) or ``upheld``.

Reports come with a source (a user's notice, a trusted flagger, the platform's own
automated detection, another notification) in turn, so detection and source vary.
`Made` is the test's own record of what each decision must yield; the report's figures
are compared with counts made from it, never from the statements' table.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select

from app.demo import DEMO_BUDGET, enforcement_graph
from app.demo_dsa import DEMO_DSA_SETTINGS
from app.domain import dsa
from app.domain.clock import utcnow
from app.domain.transparency import ALL_RESTRICTION_TYPES, RESTRICTIONS, parse_period
from app.extensions import db
from app.models import ActionProposal, Appeal, AppealCorrection, AppealDecision, BulkBatch, DsaStatement, Report
from app.services.admin.budgets import create_budget
from app.services.admin.component_specs import ComponentSpec
from app.services.admin.components import create_component
from app.services.admin.reviews import approve_change
from app.services.admin.workflows import create_workflow
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.submission import submit_batch
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.cases.reports import intake_report, record_decision
from app.services.dsa.submission import TdbEndpoint, submit_pending
from app.services.read.transparency_report import transparency_report
from app.services.uow import Actor
from tests.builders import approve, proposal_of, run_worker, set_dsa_settings, set_row

SPAM = "remove_spam"
HUMAN_TAKEDOWNS = 110
SUSPENSIONS = 60
AUTOMATED = 130
BULK_BATCHES = (("remove_content", 100), (SPAM, 100))  # (decision code, items)
TOTAL = HUMAN_TAKEDOWNS + SUSPENSIONS + AUTOMATED + sum(size for _code, size in BULK_BATCHES)
REVERSED = {"remove_content": 9, "suspend_account": 3}  # appeals decided reversed, by decision code
UPHELD = {"remove_content": 4, "suspend_account": 2}
POSTED = "2026-11-30T08:15:00Z"
SOURCES = (None, "trusted_flagger", "automated_detection", "other_notification")

AUTO_COMPONENT = "auto-takedown"
PARTIALLY, FULLY, NOT_AUTOMATED = (
    dsa.AutomatedDecision.PARTIALLY.value, dsa.AutomatedDecision.FULLY.value, dsa.AutomatedDecision.NOT_AUTOMATED.value)


def history_settings() -> dict:
    """The demo's DSA settings and the automated takedown: spam disabled as illegal
    content (another ground, category and restriction type than the demo's)."""
    settings = copy.deepcopy(DEMO_DSA_SETTINGS)
    settings["restrictions"][AUTO_COMPONENT] = {
        "restriction": "visibility", "type": "DECISION_VISIBILITY_CONTENT_DISABLED", "other": None}
    settings["decisions"][SPAM] = {
        "category": "STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
        "ground": "DECISION_GROUND_ILLEGAL_CONTENT",
        "reference": "Unfair Commercial Practices Directive 2005/29/EC, Art. 6",
        "reference_url": None,
        "keywords": [],
        "illegal": None,
    }
    return settings


# What each decision code's restriction is (the settings above): category, ground,
# restriction, restriction type.
MEANING = {
    "remove_content": ("STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH", "DECISION_GROUND_INCOMPATIBLE_CONTENT",
                       "visibility", "DECISION_VISIBILITY_CONTENT_REMOVED"),
    "suspend_account": ("STATEMENT_CATEGORY_SCAMS_AND_FRAUD", "DECISION_GROUND_INCOMPATIBLE_CONTENT",
                        "account", "DECISION_ACCOUNT_SUSPENDED"),
    SPAM: ("STATEMENT_CATEGORY_SCAMS_AND_FRAUD", "DECISION_GROUND_ILLEGAL_CONTENT",
           "visibility", "DECISION_VISIBILITY_CONTENT_DISABLED"),
}


@dataclass(frozen=True)
class Made:
    """One restriction this test caused and what its statement must say."""

    proposal_id: str
    report_id: str
    code: str
    automated_decision: str
    automated_detection: bool

    @property
    def category(self) -> str:
        return MEANING[self.code][0]

    @property
    def ground(self) -> str:
        return MEANING[self.code][1]

    @property
    def restriction(self) -> str:
        return MEANING[self.code][2]

    @property
    def restriction_type(self) -> str:
        return MEANING[self.code][3]


def automated_workflow(world) -> None:
    """An admin makes the bounded-automation takedown (component, workflow triggered
    by ``remove_spam``, budget); a second admin approves each change (FOUR-2, FOUR-3)."""
    from app.demo import ACTION_INPUT_SCHEMA, RECEIPT_OUTPUT_SCHEMA

    admin, second = world.user("admin"), world.user("admin2")

    def approved(change) -> dict:
        return approve_change(second, change.change_id, change.digest)

    spec = ComponentSpec(
        implementation_kind="webhook", implementation_reference="POST /actions/takedown",
        connection_version_id=world.connection_version_id, input_schema=json.dumps(ACTION_INPUT_SCHEMA),
        output_schema=json.dumps(RECEIPT_OUTPUT_SCHEMA), approval_mode="bounded_auto")
    component = approved(create_component(admin, name="Hide spam automatically", slug=AUTO_COMPONENT, spec=spec))
    graph = enforcement_graph(component["version_id"], world.components["restore"], "bounded_auto")
    graph["trigger"]["decision_codes"] = [SPAM]
    workflow = approved(create_workflow(admin, name="Spam automation", slug="spam-automation",
                                        authority_mode="bounded_auto", graph=json.dumps(graph), active=True))
    approved(create_budget(world.user("admin"), scope_type="workflow", scope_id=workflow["version_id"], **DEMO_BUDGET))


class History:
    """Makes the history through the services a platform and its people call, and
    keeps the test's own record of it."""

    def __init__(self, app, world) -> None:
        self.app, self.world = app, world
        self.made: list[Made] = []
        self.serial = itertools.count(1)
        self.sources = itertools.cycle(SOURCES)
        self.bulk_batches: list[str] = []
        self.corrections: list[str] = []  # proposals that correct a reversed decision
        self.seconds: dict[str, float] = {}  # how long each phase took (printed)

    def report(self, source: str | None) -> tuple[str, str]:
        """A platform's report on a post of its own, with evidence (posted time):
        (report id, post reference)."""
        n = next(self.serial)
        reference = f"post:h{n}"
        body = {"external_id": f"history-{n}",
                "targets": [{"reference": reference, "kind": "post", "evidence": {"posted_at": POSTED}}]}
        if source is not None:
            body["source"] = source
        return intake_report(body, self.world.integration_id).report_id, reference

    def decide(self, code: str, *, approved_by_a_person: bool) -> None:
        """A moderator decides a new report; a reviewer approves what the workflow
        proposed (partially automated) unless bounded automation applies it (fully)."""
        source = next(self.sources)
        report_id, _ = self.report(source)
        record_decision(report_id, decision_code=code, rationale=f"History: {code}.",
                        operator=self.world.user("moderator"))
        proposal = proposal_of(report_id)
        assert proposal is not None and proposal.state in ("approval_required", "approved", "queued"), proposal
        if approved_by_a_person:
            approve(self.world, proposal)
        automation = PARTIALLY if approved_by_a_person else FULLY
        self.made.append(Made(proposal.id, report_id, code, automation, source == "automated_detection"))

    def bulk(self, code: str, size: int) -> None:
        """Reports on `size` posts arrive; a moderator pastes the posts into a bulk
        action deciding `code`; a reviewer approves the batch: one statement per item,
        not automated."""
        references = [self.report(next(self.sources))[1] for _ in range(size)]
        moderator = self.world.user("moderator")
        action = next(a for a in bulk_actions(db.session, self.world.installation_id)
                      if a.decision_code == code)
        batch_id = start_dry_run(moderator, selection={"source": "list", "text": "\n".join(references)},
                                 action_key=action.key, decision_code=action.decision_code, reason="Spam network.")
        digest = submit_batch(moderator, batch_id, db.session.get(BulkBatch, batch_id).dry_run_digest)
        assert approve_batch(self.world.user("reviewer"), batch_id, digest) == {"approved": size, "skipped": 0}
        db.session.rollback()
        items = db.session.scalars(select(ActionProposal).where(ActionProposal.bulk_batch_id == batch_id)).all()
        assert len(items) == size
        for item in items:  # the batch's own case: the platform's own initiative, detection No
            self.made.append(Made(item.id, item.report_id, code, NOT_AUTOMATED, False))
        self.bulk_batches.append(batch_id)

    def appeal(self, made: Made, outcome: str) -> str:
        """The platform files an appeal on the report; a reviewer who did not make the
        decision decides it; a reversal's corrections are approved and applied."""
        appeal = file_appeal(made.report_id, statement="It was satire.",
                             actor=Actor("service_identity", self.world.integration_id),
                             installation_id=self.world.installation_id)
        decided = decide_appeal(appeal.appeal_id, outcome=outcome, rationale="Looked again.",
                                operator=self.world.user("reviewer2"))
        for correction_id in decided.correction_ids:  # restore the post, lift the suspension
            correction = db.session.get(AppealCorrection, correction_id)
            approve(self.world, db.session.get(ActionProposal, correction.proposal_id))
            self.corrections.append(correction.proposal_id)
        return appeal.appeal_id


def build(app, world) -> tuple[History, list[str]]:
    """The whole history; returns it and the appeal ids."""
    set_dsa_settings(world.installation_id, history_settings())
    automated_workflow(world)
    history = History(app, world)
    with phase(history, "decisions (intake, decision, approval)"):
        for _ in range(HUMAN_TAKEDOWNS):
            history.decide("remove_content", approved_by_a_person=True)
        for _ in range(SUSPENSIONS):
            history.decide("suspend_account", approved_by_a_person=True)
        for _ in range(AUTOMATED):
            history.decide(SPAM, approved_by_a_person=False)
    with phase(history, "bulk (intake, dry run, submit, approve)"):
        for code, size in BULK_BATCHES:
            history.bulk(code, size)
    with phase(history, "worker (delivery, applied receipts, statements)"):
        run_worker(app)
    assert states_of(m.proposal_id for m in history.made) == {"applied": TOTAL}
    appeals = []
    with phase(history, "appeals and corrections"):
        for code in ("remove_content", "suspend_account"):
            human = [m for m in history.made if m.code == code and m.automated_decision == PARTIALLY]
            for n, made in enumerate(human[: REVERSED[code] + UPHELD[code]]):
                appeals.append(history.appeal(made, "reversed" if n < REVERSED[code] else "upheld"))
        run_worker(app)  # the corrections: restore the post, lift the suspension
    assert states_of(history.corrections) == {"applied": sum(REVERSED.values())}
    return history, appeals


@contextmanager
def phase(history: History, name: str):
    """Time one phase of the history (printed with the test's runtime)."""
    started = time.monotonic()
    yield
    history.seconds[name] = time.monotonic() - started


def states_of(proposal_ids) -> Counter:
    db.session.rollback()
    return Counter(db.session.get(ActionProposal, pid).state for pid in proposal_ids)


def statements() -> list[DsaStatement]:
    db.session.rollback()
    return list(db.session.scalars(select(DsaStatement).order_by(DsaStatement.created_at, DsaStatement.id)))


def percentile(values: list[int], p: int) -> int | None:
    """Nearest rank, computed here on its own: the value at rank ceil(p·n/100)."""
    ordered = sorted(values)
    return ordered[-(-p * len(ordered) // 100) - 1] if ordered else None


def whole_seconds(earlier, later) -> int:
    return max(0, int((later - earlier).total_seconds()))


def expected_figures(history: History, appeal_ids: list[str]) -> dict[tuple[str, str], int | None]:
    """Every figure of the period, from the test's own record (`Made`) and the rows of
    the reports, proposals and appeals it made — never the statements' table."""
    made = history.made
    want: dict[tuple[str, str], int | None] = {("statements", "total"): len(made)}
    for section, listed in (("category", dsa.STATEMENT_CATEGORIES), ("ground", dsa.DECISION_GROUNDS),
                            ("restriction", RESTRICTIONS), ("restriction_type", ALL_RESTRICTION_TYPES),
                            ("automated_decision", dsa.AUTOMATED_DECISIONS)):
        counted = Counter(getattr(m, section) for m in made)
        want.update({(section, str(code)): counted[str(code)] for code in listed})
    want[("automated_detection", "Yes")] = sum(m.automated_detection for m in made)
    want[("automated_detection", "No")] = sum(not m.automated_detection for m in made)
    waits = []
    for m in made:
        applied_at = db.session.get(ActionProposal, m.proposal_id).confirmed_at
        waits.append(whole_seconds(db.session.get(Report, m.report_id).created_at, applied_at))
    want.update({("time_to_action", "measured"): len(waits), ("time_to_action", "median_seconds"):
                 percentile(waits, 50), ("time_to_action", "p90_seconds"): percentile(waits, 90)})
    appeals = [db.session.get(Appeal, a) for a in appeal_ids]
    decisions = [db.session.scalar(select(AppealDecision).where(AppealDecision.appeal_id == a.id)) for a in appeals]
    outcomes = Counter(d.outcome for d in decisions)
    reversed_count = sum(REVERSED.values())
    assert outcomes == {"reversed": reversed_count, "upheld": sum(UPHELD.values())}
    want.update({
        ("appeals", "received"): len(appeal_ids), ("appeals", "decided"): len(appeal_ids),
        ("appeals", "median_seconds_to_decide"): percentile(
            [whole_seconds(a.created_at, d.created_at) for a, d in zip(appeals, decisions, strict=True)], 50),
        ("appeals", "decided_upheld"): sum(UPHELD.values()), ("appeals", "decided_modified"): 0,
        ("appeals", "decided_reversed"): reversed_count, ("appeals", "reversed"): reversed_count,
    })
    suspended = sum(m.code == "suspend_account" for m in made)
    want.update({("suspensions", "account"): suspended, ("suspensions", "provision"): 0,
                 ("suspensions", "total"): suspended})
    return want


def test_500_decisions_500_statements_submitted_once_and_the_report_adds_up_DSA_2_DSA_3_DSA_6(app, world, tdb):
    """DSA-2, DSA-3, DSA-6: 500 decisions (human, automated, temporary, bulk, some
    reversed on appeal) applied through the worker yield exactly 500 statements, each
    valid; submitted in batches of at most 100 through a 429 and a batch with one
    invalid statement, every valid one is created once and the invalid one is a dead
    letter with its error; the period's report equals the test's own counts."""
    started = time.monotonic()
    first_day = utcnow().date()
    history, appeal_ids = build(app, world)
    built = time.monotonic()

    rows = statements()
    assert len(rows) == TOTAL and {r.proposal_id for r in rows} == {m.proposal_id for m in history.made}
    assert {r.state for r in rows} == {"pending"}
    assert all(dsa.statement_problems(r.statement) == {} for r in rows)
    by_proposal = {r.proposal_id: r for r in rows}
    for m in history.made:  # each statement says what the test did
        statement = by_proposal[m.proposal_id].statement
        assert statement["puid"] == dsa.puid_for(m.proposal_id)
        assert statement["automated_decision"] == m.automated_decision
        assert statement["automated_detection"] == ("Yes" if m.automated_detection else "No")
        assert statement["category"] == m.category and statement["decision_ground"] == m.ground
        temporary = m.code == "suspend_account"
        assert bool(statement.get("end_date_account_restriction")) is temporary, statement

    # This one stands for a statement the Transparency Database refuses: its category is
    # corrupted in the stored JSON (the report's columns are left as they were).
    broken = rows[150]
    set_row(DsaStatement, broken.id, statement={**broken.statement, "category": "STATEMENT_CATEGORY_UNHEARD_OF"})
    endpoint = TdbEndpoint(base_url=tdb.base_url, token="tdb-token")
    runs = [submit_pending(world.installation_id, endpoint, max_batches=1)]
    tdb.force_429(1, retry_after=0)  # mid-way, the database asks to slow down
    while runs[-1].retry_after is not None or runs[-1].batches:
        runs.append(submit_pending(world.installation_id, endpoint))
        assert len(runs) < 20, runs
    assert any(run.error == "tdb_rate_limited" for run in runs)
    calls = tdb.batches()
    # 100 created; the 429 (nothing read); the batch with the invalid one refused whole,
    # split: its 99 others resent at once (with the next pending one) and created; the rest.
    assert [(c.status, c.count) for c in calls] == [
        (201, 100), (429, 0), (422, 100), (201, 100), (201, 100), (201, 100), (201, 99)]
    assert broken.puid in calls[2].puids and set(calls[2].puids) - {broken.puid} < set(calls[3].puids)
    created = Counter(puid for call in calls if call.status == 201 for puid in call.puids)
    valid = {r.puid for r in rows} - {broken.puid}
    assert set(created) == set(tdb.statements) == valid and set(created.values()) == {1}
    final = {r.puid: r for r in statements()}
    assert {p: r.state for p, r in final.items() if p != broken.puid} == dict.fromkeys(valid, "submitted")
    assert final[broken.puid].state == "dead_letter"
    assert list(json.loads(final[broken.puid].last_error)) == ["category"]  # the database's own words

    period = parse_period(first_day.isoformat(), (utcnow().date() + timedelta(days=1)).isoformat())
    report = transparency_report(db.session, world.installation_id, period)
    got = {(section, key): value for section, key, _label, value in report.rows()}
    assert got == expected_figures(history, appeal_ids)
    phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in history.seconds.items())
    print(f"\nDSA history: built in {built - started:.1f} s ({phases}); submitted and reported in "
          f"{time.monotonic() - built:.1f} s")
