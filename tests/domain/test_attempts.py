"""What an attempt row says about its request, and the message id of an operation's
requests (DLV-4)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.attempts import ABANDONED, FINISHED, IN_FLIGHT, attempt_status, webhook_message_id

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(seconds=30)
EARLIER = NOW - timedelta(seconds=30)


def test_status_names():
    assert (FINISHED, IN_FLIGHT, ABANDONED) == ("finished", "in_flight", "abandoned")


@pytest.mark.parametrize("state", ["applying", "failed", "applied"])
def test_a_finished_attempt_is_finished_whatever_the_proposal_does(state):
    """DLV-4: an attempt with a finish time is finished, even if it is the current claim."""
    assert attempt_status(True, 2, 2, state, LATER, NOW) == FINISHED
    assert attempt_status(True, 1, 2, state, None, NOW) == FINISHED


def test_the_current_claim_under_a_live_lease_is_in_flight():
    """DLV-4: the proposal's latest claim, still applying, lease not yet expired."""
    assert attempt_status(False, 3, 3, "applying", LATER, NOW) == IN_FLIGHT


@pytest.mark.parametrize(
    ("number", "count", "state", "lease"),
    [
        (2, 3, "applying", LATER),  # an earlier claim: the next claim superseded it
        (4, 3, "applying", LATER),  # not the proposal's latest claim either
        (3, 3, "failed", LATER),  # the proposal moved on
        (3, 3, "queued", LATER),
        (3, 3, "applying", None),  # no lease: nobody holds it
        (3, 3, "applying", NOW),  # the lease ends now: expired
        (3, 3, "applying", EARLIER),
    ],
)
def test_an_unfinished_attempt_nobody_holds_was_abandoned(number, count, state, lease):
    """DLV-4: a worker killed between request and answer leaves an attempt that is not in flight."""
    assert attempt_status(False, number, count, state, lease, NOW) == ABANDONED


def test_dlv4_one_webhook_id_per_operation():
    """DLV-4: ``msg_`` + 32 hex of SHA-256 of the operation id: every attempt and cycle of one
    operation sends the same message id, another operation another one."""
    assert webhook_message_id("op_1") == "msg_f90b19374af6e392e6ebb6f6e9ca9717"
    assert webhook_message_id("op_1") == webhook_message_id("op_1")
    assert webhook_message_id("op_2") != webhook_message_id("op_1")
    assert webhook_message_id("é") == "msg_" + hashlib.sha256("é".encode()).hexdigest()[:32]
