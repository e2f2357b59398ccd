"""What waits for an operator's approval: the inbox and the navigation's count (SPEC POL-7).

`approval_notices.eligible` is the one rule; here it is applied to one operator over
the open proposals, with its maker and vote parts as SQL (`is_a_maker`, `_voted`) and
the policy part in Python: admission once per distinct recorded route, whose admitted
texts then filter the rows read (`_admitted_routes`), and whether an approval would
still count over the rows loaded (`_would_count`). The statements are
built once (building them cost more than running them, on every page). The count is
kept per operator beside a cheap mark of everything it reads (`awaiting_count`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Text, and_, bindparam, exists, func, or_, select, tuple_, type_coerce

from app.domain import approval_policy as pol
from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, ApprovalVote, OperatorUser, predicates
from app.models.statements import prebuilt
from app.services.approval_notices import admits_by, approver_of

P = ActionProposal
INBOX_LIMIT = 200  # rows the inbox (and the count) read at most


@functools.lru_cache(maxsize=256)
def _recorded_policies(route_text: str | None) -> tuple[pol.Policy, ...]:
    """The policies of an `approval_route` column as stored (canonical JSON text, so
    equal records are equal text): most open proposals share a handful of records,
    and the navigation's count reads them on every page (POL-7)."""
    return pol.policies_of(json.loads(route_text) if route_text else None)


def _route_text():
    """SQL: the proposal's recorded policies as their stored text (not parsed per row)."""
    return type_coerce(P.approval_route, Text).label("route_text")


def _voted(operator_id, now):
    """SQL: the operator has a counting vote on the proposal (POL-2)."""
    return exists().where(predicates.counting_vote(now), ApprovalVote.approver_id == operator_id)


def _candidates(columns: str, after: bool):
    """SQL: proposals that await a decision, not made by the operator, without their
    vote, newest first; `columns` "ids" (id, digest, recorded policies as text, has
    votes, created_at) or "rows" (the proposal, recorded policies as text, has votes).
    Only proposals recorded under `routes` (the stored texts of the recorded policies
    that admit the operator, `_admitted_routes`), and those without a record when
    ``unrouted``. Built once per shape (building it cost more than running it, on
    every page's navigation): bound parameters ``installation_id``, ``operator_id``,
    ``now``, ``limit``, ``routes``, ``unrouted`` and, `after` a batch, ``before_at``
    and ``before_id`` (its last row)."""
    from app.services.lifecycle.maker_lookup import is_a_maker

    def build():
        operator_id, now = bindparam("operator_id"), bindparam("now")
        has_votes = _has_votes(now).label("has_votes")
        shown = (P.id, P.payload_digest) if columns == "ids" else (P,)
        trailing = (P.created_at,) if columns == "ids" else ()
        route = type_coerce(P.approval_route, Text)
        query = select(*shown, _route_text(), has_votes, *trailing).where(
            P.installation_id == bindparam("installation_id"),
            predicates.awaits_decision(now),
            P.bulk_batch_id.is_(None),  # decided with its batch (BULK-3)
            or_(route.in_(bindparam("routes", expanding=True)), and_(P.approval_route.is_(None), bindparam("unrouted"))),
            ~is_a_maker(operator_id),
            ~_voted(operator_id, now),
        )
        if after:
            query = query.where(tuple_(P.created_at, P.id) < tuple_(
                bindparam("before_at", type_=P.created_at.type), bindparam("before_id")))
        return query.order_by(P.created_at.desc(), P.id.desc()).limit(bindparam("limit"))

    return prebuilt(("awaiting", columns, after), build)


def _admitted_routes(operator: OperatorUser, texts: list[str | None]) -> dict:
    """The `_candidates` parameters ``routes`` and ``unrouted``: which of the open
    proposals' recorded policies (`texts`, stored text or None, from `_read_mark`)
    admit `operator` (POL-1), decided once per distinct record, so an operator
    admitted to few of many open proposals reads only those."""
    me = approver_of(operator)
    admitted = [text for text in texts if admits_by(me, _recorded_policies(text))]
    return {"routes": [text for text in admitted if text is not None], "unrouted": None in admitted}


def _candidate_batch(operator: OperatorUser, now: datetime, columns: str, last: tuple | None,
                     routes: dict) -> list:
    """One batch of `_candidates` under `routes` (`_admitted_routes`), INBOX_LIMIT rows
    at most, after `last` ((created_at, id) of the previous batch's last row) or from
    the newest."""
    parameters = {"installation_id": operator.installation_id, "operator_id": operator.id, "now": now,
                  "limit": INBOX_LIMIT, **routes}
    if last is not None:
        parameters.update(before_at=last[0], before_id=last[1])
    return db.session.execute(_candidates(columns, last is not None), parameters).all()


def _has_votes(now):
    """SQL: the proposal has some counting vote (POL-2), so an approval might count for nothing."""
    return exists().where(predicates.counting_vote(now))


class _Voters:
    """The standing of everyone with a vote on an open proposal of the installation,
    read once when some row needs it (`_voters_of_open`): whether an approval would
    still count reads the voters' standing (POL-1)."""

    def __init__(self, installation_id: str, now: datetime):
        self._parameters = {"installation_id": installation_id, "now": now}
        self.approvers: dict[str, pol.Approver] | None = None

    def of(self, ids: set[str]) -> dict[str, pol.Approver]:
        """The approvers of `ids` (operator ids of votes read before this)."""
        if self.approvers is None:
            self.approvers = {who.id: approver_of(who) for who in db.session.scalars(_voters_of_open(), self._parameters)}
        missing = ids - self.approvers.keys()
        if missing:  # their proposal left the open set between the two reads
            query = select(OperatorUser).where(OperatorUser.id.in_(missing)).execution_options(populate_existing=True)
            self.approvers.update({who.id: approver_of(who) for who in db.session.scalars(query)})
        return self.approvers

    def read_standing(self) -> tuple:
        """Their standing now, read from the database."""
        self.of(set())
        return self.standing()

    def standing(self) -> tuple | None:
        """Their standing as a comparable value, or None when it was never read."""
        return None if self.approvers is None else tuple(_standing(a) for a in self.approvers.values())


def _standing(approver: pol.Approver) -> tuple:
    """What admits `approver` (POL-1), as a value that compares and hashes."""
    return approver.id, approver.roles, approver.team, tuple(sorted(approver.attributes.items()))


def _voters_of_open():
    """SQL, built once: the operators with any vote on an open proposal of the
    installation (their current rows, not what this session holds). Bound parameters
    ``installation_id``, ``now``."""

    def build():
        on_open = (
            select(ApprovalVote.approver_id)
            .join(P, ApprovalVote.proposal_id == P.id)
            .where(P.installation_id == bindparam("installation_id"), predicates.awaits_decision(bindparam("now")),
                   P.bulk_batch_id.is_(None))
        )
        return (select(OperatorUser).where(OperatorUser.id.in_(on_open)).order_by(OperatorUser.id)
                .execution_options(populate_existing=True))

    return prebuilt(("inbox-voters",), build)


def _would_count(operator: OperatorUser, rows, now: datetime, voters: _Voters) -> list:
    """The `rows` ((id, payload digest, recorded policies as text, has votes, item))
    that wait for `operator` (POL-1, POL-7): `eligible` with the maker, vote and
    admission parts already done in SQL (`_candidates` under `_admitted_routes`), so
    what is left is whether their approval would count for some factor (not
    ``approval_factor_already_met``). One query for the votes of those that have any;
    none when no row has a vote."""
    me = approver_of(operator)
    voted = [row[0] for row in rows if row[3]]
    if not voted:
        return [row[4] for row in rows]
    votes = db.session.execute(
        select(ApprovalVote.proposal_id, ApprovalVote.approver_id, ApprovalVote.decision, ApprovalVote.payload_digest,
               ApprovalVote.expires_at, ApprovalVote.batch_digest, ApprovalVote.created_at)
        .where(ApprovalVote.proposal_id.in_(voted))
        .order_by(ApprovalVote.created_at, ApprovalVote.id)
    ).all()
    approvers = voters.of({vote[1] for vote in votes})
    by_proposal: dict[str, list[pol.Vote]] = {}
    for proposal_id, approver_id, *vote in votes:
        by_proposal.setdefault(proposal_id, []).append(pol.Vote(approvers[approver_id], *vote))
    return [
        row[4]
        for row in rows
        if not row[3]
        or pol.vote_refusal(_recorded_policies(row[2]), by_proposal.get(row[0], ()), me, pol.APPROVE,
                            makers=(), payload_digest=row[1], now=now) != "approval_factor_already_met"
    ]


def awaiting(operator: OperatorUser, now: datetime | None = None) -> list[ActionProposal]:
    """The proposals waiting for `operator`'s approval, newest first (POL-7), at most
    `INBOX_LIMIT`: `eligible` with its maker and vote parts as SQL, read in batches of
    INBOX_LIMIT until that many pass the rest of the rule (admission, and an approval
    that would still count: POL-1) or none are left, so that newer proposals others
    must decide never hide one that waits for this operator. One more query per batch
    for the votes when some have votes."""
    now = now or utcnow()
    if not operator.active:
        return []
    routes = _admitted_routes(operator, [row[0] for row in _read_mark(operator, now)])
    voters = _Voters(operator.installation_id, now)
    found: list[ActionProposal] = []
    last = None
    while len(found) < INBOX_LIMIT:
        batch = _candidate_batch(operator, now, "rows", last, routes)
        found += _would_count(operator, [(p.id, p.payload_digest, text, has, p) for p, text, has in batch], now, voters)
        if len(batch) < INBOX_LIMIT:
            break
        last = (batch[-1][0].created_at, batch[-1][0].id)
    return found[:INBOX_LIMIT]


def awaiting_count(operator: OperatorUser, now: datetime | None = None) -> int:
    """How many proposals wait for `operator` (the navigation's badge, POL-7), as
    `awaiting` counts them, at most `INBOX_LIMIT`.

    Every page shows it, and counting reads the open proposals in batches (the maker
    rule for each, about 3 ms at 120 open) and, for an operator whose approval would
    count on few of the many that admit them (their factor met by others' votes), all
    of those with their votes (about 180 ms on PostgreSQL at 2,000). So the count is
    kept per operator beside what it depends on, for at most `KEPT_SECONDS`: a cheap
    mark of the open proposals and their counting votes (`_inbox_mark`), the
    operator's own standing, and, when some row read votes, the standing of everyone
    who voted on an open proposal (`_Voters`). It is counted again when one of them
    differs. The time bound covers what the mark cannot see: two changes that leave
    it as it was, such as a proposal leaving as another enters whose ``updated_at``
    is not the newest (stamped by a clock ahead of the others, or stamped before a
    newer one and committed late), or a vote expiring as one with an older timestamp
    commits late."""
    now = now or utcnow()
    if not operator.active:
        return 0
    key = (operator.id, operator.installation_id)
    mark = _read_mark(operator, now)
    standing = _standing(approver_of(operator))
    kept = _KEPT.get(key)
    fingerprint = _fingerprint(mark)
    if kept is not None and kept.still_holds(fingerprint, standing, now, operator.installation_id):
        return kept.count
    voters, routes = _Voters(operator.installation_id, now), _admitted_routes(operator, [row[0] for row in mark])
    count, last = 0, None
    while count < INBOX_LIMIT:
        batch = _candidate_batch(operator, now, "ids", last, routes)
        count += len(_would_count(operator, [(i, d, r, has, i) for i, d, r, has, _ in batch], now, voters))
        if len(batch) < INBOX_LIMIT:
            break
        last = (batch[-1][4], batch[-1][0])
    if len(_KEPT) >= _KEPT_MOST and key not in _KEPT:
        _KEPT.clear()
    _KEPT[key] = _Kept(fingerprint, standing, voters.standing(), now, min(count, INBOX_LIMIT))
    return min(count, INBOX_LIMIT)


def _fingerprint(mark: tuple) -> tuple:
    """`mark` as kept: each recorded route by its text's hash, not the text (a route
    per settings version, each a few hundred bytes, kept for every operator)."""
    return tuple((hash(row[0]), *row[1:]) for row in mark)


@dataclass(frozen=True)
class _Kept:
    """An operator's count, read at `read_at` beside the mark, their standing and (when
    some row read votes) the voters' standing."""

    mark: tuple
    standing: tuple
    voters: tuple | None
    read_at: datetime
    count: int

    def still_holds(self, mark: tuple, standing: tuple, now: datetime, installation_id: str) -> bool:
        """Nothing the count read has changed, as far as can be seen (one more query
        for the voters' standing when the count read votes)."""
        if (mark, standing) != (self.mark, self.standing):
            return False
        if not timedelta(0) <= now - self.read_at <= timedelta(seconds=KEPT_SECONDS):
            return False
        if self.voters is None:
            return True
        return _Voters(installation_id, now).read_standing() == self.voters


KEPT_SECONDS = 15
# (operator id, installation) -> its kept count, in this process
_KEPT: dict[tuple[str, str], _Kept] = {}
_KEPT_MOST = 4096


def _inbox_mark():
    """SQL, built once: what changes whenever some operator's count may change, per
    distinct recorded policies (their stored text) — the open proposals (how many, the
    latest ``updated_at``) and their counting votes (how many, the latest cast). A
    proposal or a vote expiring changes a count. Bound parameters ``installation_id``,
    ``now``."""

    def build():
        now = bindparam("now")
        route = type_coerce(P.approval_route, Text)
        return (
            select(_route_text(), func.count(P.id.distinct()), func.max(P.updated_at), func.count(ApprovalVote.id),
                   func.max(ApprovalVote.created_at))
            .select_from(P)
            .outerjoin(ApprovalVote, predicates.counting_vote(now))
            .where(
                P.installation_id == bindparam("installation_id"),
                predicates.awaits_decision(now),
                P.bulk_batch_id.is_(None),
            )
            .group_by(route)
            .order_by(route)
        )

    return prebuilt(("inbox-mark",), build)


def _read_mark(operator: OperatorUser, now: datetime) -> tuple:
    """`_inbox_mark`'s rows for the operator's installation: (recorded policies as
    text, open proposals, their latest ``updated_at``, counting votes, the latest cast)."""
    rows = db.session.execute(_inbox_mark(), {"installation_id": operator.installation_id, "now": now}).all()
    return tuple(tuple(row) for row in rows)


def forget_kept_counts() -> None:
    """Drop this process's kept counts (tests that count a cold page's queries)."""
    _KEPT.clear()
