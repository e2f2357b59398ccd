"""The `notify_user` action that delivers a restriction's notice to the affected user
(SPEC §7 DSA-4): a proposal of its own, following the applied restriction,
authorized by the restriction's approval (no second person is asked).

Pure functions over plain values; `app.services.dsa.notices` loads, inserts and
audits.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.domain.clock import iso
from app.domain.dsa_notice import NOTICE_ACTION_CODE
from app.domain.proposal.destination import Destination
from app.domain.proposal.identity import NewProposal, OriginalFacts, expires_at, following_proposal
from app.domain.states import ProposalState

# A notice stays authorized this long after its restriction applied: an outage of
# weeks delays it and never lets it lapse (within ID-3's 31-day bound).
NOTICE_GRACE_SECONDS = 30 * 86_400
NOTICE_CREATOR_PREFIX = "notice-of:"  # created_by_id of every notice: how SQL tells one apart (DSA-4)
CONTENT_RESTRICTIONS = ("visibility", "monetary")  # a content's author is the one affected


def notice_operation_id(restriction_operation_id: str) -> str:
    """The one notice of a restriction's operation (DSA-4): ``notice:{operation}``."""
    return f"notice:{restriction_operation_id}"


def affected_user(restriction: str, target: dict[str, Any], author_reference: str | None) -> dict[str, Any]:
    """Whom a notice goes to (DSA-4): the content's author for a content restriction
    (visibility, monetary), when the evidence names one; else the restriction's own
    target (an account, or ``author_of`` a post, which the platform resolves).

    Args:
        restriction: the component's `dsa.Restriction` value.
        target: the restriction's target object.
        author_reference: the evidence's ``author_reference`` of that target, or None.
    """
    if restriction in CONTENT_RESTRICTIONS and author_reference:
        return {"kind": "account", "reference": author_reference}
    return dict(target)


def notice_payload(puid: str, notice: dict[str, str], complaint_until: datetime) -> dict[str, Any]:
    """The notice's payload: ``{puid, language, subject, text, complaint_until}``
    (complaint_until as ISO-8601 UTC)."""
    return {
        "puid": puid,
        "language": notice["language"],
        "subject": notice["subject"],
        "text": notice["text"],
        "complaint_until": iso(complaint_until),
    }


def notice_proposal(
    original: OriginalFacts,
    *,
    applied_at: datetime,
    component_version_id: str,
    target: dict[str, Any],
    payload: dict[str, Any],
    approval_id: str | None,
    destination: Destination | None,
) -> NewProposal:
    """The `notify_user` proposal of an applied restriction (DSA-4).

    Queued at once, under the restriction's authority and approval mode: a human
    approval's row for this digest is written by the service, naming the approval it
    comes from; a bounded_auto restriction's notice runs under the same automation.

    Args:
        original: the applied restriction.
        applied_at: when it applied (its confirmation time, UTC).
        component_version_id: the notice component's version in force.
        target: the affected user (`affected_user`).
        payload: `notice_payload`.
        approval_id: the approval that authorized the restriction (None for bounded_auto).
        destination: the notice component's delivery in force (FOUR-5).
    """
    expiry = expires_at(applied_at, NOTICE_GRACE_SECONDS)
    operation = notice_operation_id(original.operation_id)
    authorized = {"authorized_by_approval_id": approval_id, "authorized_by_digest": original.payload_digest}
    return following_proposal(
        original,
        destination,
        id=f"{original.id}:notice",
        operation_id=operation,
        action_code=NOTICE_ACTION_CODE,
        target=target,
        payload=payload,
        preconditions={},
        component_version_id=component_version_id,
        policy_version_id=original.policy_version_id,
        expires_at=expiry,
        decision_id=original.decision_id,
        authority_mode=original.authority_mode,
        approval_mode=original.approval_mode,
        approval_policy={"mode": original.approval_mode, "expires_at": iso(expiry), "notice": authorized},
        state=ProposalState.QUEUED,
        created_by_type="system",
        created_by_id=NOTICE_CREATOR_PREFIX + original.id,
        created_at=applied_at,
        next_attempt_at=applied_at,
        audit_details={"operation_id": operation, "notice_of_proposal_id": original.id, **authorized},
    )
