"""The rules of one bulk batch, pure (SPEC BULK-2..7)."""

from __future__ import annotations

import itertools

import pytest

from app.domain.bulk import batch as rules
from app.domain.bulk.batch import Bucket, Outcome, Standing
from app.domain.states import ProposalState


@pytest.mark.parametrize(
    ("standing", "expected"),
    [
        (Standing(), (Outcome.WOULD_ACT, None)),
        (Standing(pending=True), (Outcome.DUPLICATE, "bulk_subject_action_pending")),
        (Standing(applied=True, pending=True), (Outcome.ALREADY_APPLIED, "bulk_subject_already_applied")),
        (Standing(protected=True, applied=True), (Outcome.PROTECTED, "bulk_subject_protected")),
        (Standing(problem="action_payload_schema_invalid", protected=True), (Outcome.INVALID, "action_payload_schema_invalid")),
    ],
)
def test_bulk_2_each_subject_has_one_outcome_in_order_of_precedence(standing, expected):
    """BULK-2: invalid before protected before already applied before duplicate."""
    assert rules.classify(standing) == expected


def test_bulk_2_the_dry_run_digest_covers_every_item_and_the_action():
    action = {"component_version_id": "cmv_1", "action_code": "takedown", "decision_code": "spam"}
    items = [(0, "post:1", "post", "would_act"), (1, "post:2", "post", "protected")]
    digest = rules.dry_run_digest(action, items)
    assert digest.startswith("sha256:") and len(digest) == 71
    assert rules.dry_run_digest(action, items) == digest
    assert rules.dry_run_digest(action, [items[0], (1, "post:2", "post", "would_act")]) != digest
    assert rules.dry_run_digest({**action, "decision_code": "abuse"}, items) != digest
    assert rules.dry_run_digest(action, items[:1]) != digest


def test_bulk_3_the_batch_digest_is_over_the_sorted_item_digests():
    """BULK-3: the order items are listed in does not change it; any item does."""
    digests = ["sha256:b", "sha256:a", "sha256:c"]
    digest = rules.batch_digest("blk_1", "spam", digests)
    assert rules.batch_digest("blk_1", "spam", sorted(digests)) == digest
    assert rules.batch_digest("blk_1", "spam", digests[:2]) != digest
    assert rules.batch_digest("blk_2", "spam", digests) != digest
    assert rules.batch_digest("blk_1", "spam", [*digests[:2], "sha256:d"]) != digest


def test_bulk_4_drift_counts_subjects_in_one_selection_and_not_the_other():
    frozen = [f"post:{n}" for n in range(100)]
    assert rules.drift_share(frozen, frozen) == 0
    assert rules.drift_share(frozen, frozen[:90]) == pytest.approx(0.10)
    assert rules.drift_share(frozen, frozen[5:] + ["post:x"] * 1 + ["post:y"]) == pytest.approx(0.07)
    assert rules.drift_share([], ["post:1"]) == 1.0
    assert not rules.drifted(0.10, 0.10) and rules.drifted(0.1001, 0.10)


def test_bulk_5_the_cap_is_the_largest_of_the_roles():
    assert rules.cap_for(["moderator"], {}) == rules.DEFAULT_CAP == 1000
    assert rules.cap_for(["moderator", "reviewer"], {"reviewer": 5000}) == 5000
    assert rules.cap_for(["moderator"], {"moderator": 200}) == 200
    assert rules.cap_for([], {}) == 1000
    assert rules.cap_problem(1000, 1000) is None and rules.cap_problem(1001, 1000) == "bulk_selection_over_cap"


def test_bulk_3_no_maker_of_the_batch_or_an_item_decision_approves_it():
    assert rules.approval_verdict("op_r", ["reviewer"], {"op_m"})
    refused = rules.approval_verdict("op_m", ["reviewer"], {"op_m", "op_x"})
    assert not refused and "second reviewer" in refused.reason
    assert not rules.approval_verdict("op_r", ["moderator"], {"op_m"})


STATES = [s.value for s in ProposalState]


@pytest.mark.parametrize(
    ("state", "terminal", "attempts", "skip", "expected"),
    [
        ("approval_required", False, 0, None, Bucket.NOT_STARTED),
        ("queued", False, 0, None, Bucket.NOT_STARTED),
        ("queued", False, 2, None, Bucket.IN_FLIGHT),  # a 429 deferred it after sending
        ("applying", False, 1, None, Bucket.IN_FLIGHT),
        ("failed", False, 1, None, Bucket.IN_FLIGHT),  # waiting to be retried
        ("failed", True, 8, None, Bucket.FAILED),  # a dead letter
        ("applied", False, 1, None, Bucket.APPLIED),
        ("compensation_required", False, 1, None, Bucket.APPLIED),  # applied, then undone
        ("cancelled", False, 0, "action_precondition_changed", Bucket.SKIPPED),
        ("cancelled", False, 0, None, Bucket.CANCELLED),
        ("rejected", False, 0, None, Bucket.CANCELLED),
    ],
)
def test_bulk_6_each_item_is_in_one_bucket(state, terminal, attempts, skip, expected):
    assert rules.bucket(state, terminal, attempts, skip) == expected


def test_bulk_6_the_ledger_adds_up_for_any_mix_of_items():
    rows = [
        (state, terminal, attempts, skip, 3)
        for state, terminal, attempts, skip in itertools.product(STATES, (False, True), (0, 1), (None, "x"))
    ]
    total = 3 * len(rows)
    book = rules.ledger_of(rows, total)
    assert book.adds_up
    assert sum(book[b] for b in rules.LEDGER) == total
    assert not rules.ledger_of(rows, total + 1).adds_up
    assert 0 <= book.done_share <= 1 and rules.Ledger({}, 0).done_share == 1.0
