"""What a list row of proposals loads: every column but the JSON documents a list
never shows (issue 25: a proposal row parses up to 8 JSON columns; a list row needs
its target). Deferred with raiseload, so a template that reaches for one fails in
tests instead of loading it row by row."""

from __future__ import annotations

from sqlalchemy.orm import defer

from app.models import ActionProposal

P = ActionProposal
# what `approving` reads of each row of the tasks page (FOUR-5: delivery in words,
# a temporary action's reversal, a change of end's kind)
APPROVING = (P.delivery, P.temporary, P.approval_policy)
# the JSON columns no list row reads (the target names the subject: kept; the
# recorded approval route is read on the proposal page and by the inbox)
UNLISTED = (P.payload, P.preconditions, P.approval_policy, P.delivery, P.last_receipt, P.temporary, P.approval_route)


def list_row_options(path=None, keep=()) -> list:
    """Loader options deferring `UNLISTED` but `keep` (raising if read) on proposals,
    or on the proposals reached by `path` (a relationship loader option such as
    ``joinedload(HumanTask.proposal)``).

    Args:
        path: None for a query of proposals, else the loader option reaching them.
        keep: columns of `UNLISTED` the page does read (e.g. ``P.delivery``).
    """
    deferred = [defer(column, raiseload=True) for column in UNLISTED if not any(column is k for k in keep)]
    return deferred if path is None else [path.options(*deferred)]
