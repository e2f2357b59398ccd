"""Where each subject of a selection stands for the action a batch takes (SPEC BULK-2,
BULK-4): already acted on, under way, protected. Reads only; one indexed query per
500 subjects (`ix_action_proposals_subject`).
"""

from __future__ import annotations

from collections.abc import Iterable

from flask import current_app
from sqlalchemy import select

from app.domain.bulk.batch import Standing
from app.domain.bulk.subjects import canonical_reference
from app.domain.states import Move, is_terminal, target
from app.models import ActionProposal

P = ActionProposal
CHUNK = 500
APPLIED = target(Move.RECEIPT_APPLIED).value


def protected_subjects() -> frozenset[str]:
    """``BULK_PROTECTED_SUBJECTS``: subjects never acted on in bulk (BULK-2; approval
    policies will mark them, POL-4)."""
    return frozenset(canonical_reference(ref) for ref in current_app.config.get("BULK_PROTECTED_SUBJECTS") or ())


def standings(
    session, installation_id: str, action_code: str, references: Iterable[str], *, exclude_batch_id: str | None = None
) -> dict[str, Standing]:
    """Each subject's `Standing` for `action_code`, by reference.

    Args:
        references: the subjects' references (compared in `canonical_reference`'s
            spelling, as `ActionProposal.target_reference` stores them).
        exclude_batch_id: a batch whose own items are not counted (its approval
            resolves its selection again while its items wait).

    "Applied" is an applied action of this code on the subject that no applied
    reversal ended (a compensated one has moved on from ``applied``); "pending" is
    one not yet terminal.
    """
    protected = protected_subjects()
    given = list(dict.fromkeys(references))
    spelled = {reference: canonical_reference(reference) for reference in given}  # one spelling each
    wanted = list(dict.fromkeys(spelled.values()))
    applied: dict[str, set[str]] = {}
    pending: set[str] = set()
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        query = select(P.id, P.target_reference, P.state, P.delivery_terminal).where(
            P.installation_id == installation_id,
            P.action_code == action_code,
            P.target_reference.in_(chunk),
            P.reverses_proposal_id.is_(None),
            P.compensates_proposal_id.is_(None),
            P.appeal_id.is_(None),
        )
        if exclude_batch_id is not None:
            query = query.where((P.bulk_batch_id.is_(None)) | (P.bulk_batch_id != exclude_batch_id))
        for proposal_id, reference, state, terminal in session.execute(query):
            if state == APPLIED:
                applied.setdefault(reference, set()).add(proposal_id)
            elif not is_terminal(state, terminal):
                pending.add(reference)
    ended = _reversed(session, {pid for ids in applied.values() for pid in ids})
    return {
        reference: Standing(
            applied=bool(applied.get(subject, set()) - ended),
            pending=subject in pending,
            protected=subject in protected,
        )
        for reference, subject in spelled.items()
    }


def _reversed(session, proposal_ids: set[str]) -> set[str]:
    """The applied actions among `proposal_ids` that an applied reversal ended (TEMP-2)."""
    ended: set[str] = set()
    ids = sorted(proposal_ids)
    for start in range(0, len(ids), CHUNK):
        ended.update(
            session.scalars(
                select(P.reverses_proposal_id).where(
                    P.reverses_proposal_id.in_(ids[start : start + CHUNK]), P.state == APPLIED
                )
            )
        )
    return ended

