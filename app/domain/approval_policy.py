"""Approval policies: who must approve an action before it is sent (SPEC POL-1..3, POL-5).

A policy is an AND of factors. A factor needs `count` distinct approvers who pass its
eligibility filter (a role, a team, operator attributes set by admins); `deny_count`
rejections by people eligible for it veto the policy. Several alternative policies may
apply to one proposal (OR): the first one met releases it; it is rejected when every
alternative is vetoed.

Votes count only while they are bound to the current payload digest (and batch
digest) and have not expired; makers count for nothing; one person counts for at most
one factor (a matching of approvers to factors, so the order in which people approved
never decides whether a policy is met).

The installation's single second-person rule is `DEFAULT_POLICY` (one reviewer, one
rejection vetoes, a rejection's reason optional as before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

APPROVE, REJECT = "approved", "rejected"
DECIDER_ROLE = "reviewer"  # APPR-4: every approver holds it, whatever a factor's filter
TTL_MIN_SECONDS, TTL_MAX_SECONDS = 60, 30 * 24 * 3600
MAX_FACTORS, MAX_COUNT = 5, 10


@dataclass(frozen=True)
class Eligibility:
    """Who may count for a factor: any of `roles`, and (when given) one of `teams`,
    and every attribute pair in `attributes`."""

    roles: tuple[str, ...] = ("reviewer",)
    teams: tuple[str, ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()

    def admits(self, approver: Approver) -> bool:
        if DECIDER_ROLE not in approver.roles:  # APPR-4: only reviewers approve; a factor narrows that
            return False
        if self.roles and not set(self.roles) & approver.roles:
            return False
        if self.teams and approver.team not in self.teams:
            return False
        return all(approver.attributes.get(key) == value for key, value in self.attributes)


@dataclass(frozen=True)
class Factor:
    key: str  # "peer", "lead"
    label: str  # "peer" (plural in words: "peers")
    count: int = 1
    eligibility: Eligibility = Eligibility()
    deny_count: int = 1


@dataclass(frozen=True)
class Policy:
    key: str
    label: str
    factors: tuple[Factor, ...]
    ttl_seconds: int | None = None  # an approval's life; None: the proposal's authorization expiry
    reason_on_reject: bool = True  # POL-1; the default policy keeps APPR-1's optional reason


DEFAULT_POLICY = Policy(
    "default", "One reviewer", (Factor("reviewer", "reviewer"),), ttl_seconds=None, reason_on_reject=False
)
# POL-5: an irreversible action (and a protected subject's, POL-4) needs two reviewers unless configured.
STRONGER_POLICY = Policy("two_reviewers", "Two reviewers", (Factor("reviewer", "reviewer", count=2),))


@dataclass(frozen=True)
class Approver:
    id: str
    roles: frozenset[str]
    team: str | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Vote:
    approver: Approver
    decision: str  # approved, rejected
    payload_digest: str
    expires_at: datetime
    batch_digest: str | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class FactorProgress:
    factor: Factor
    approvers: tuple[str, ...]  # ids counted for it
    rejections: int

    @property
    def met(self) -> bool:
        return len(self.approvers) >= self.factor.count

    @property
    def vetoed(self) -> bool:
        return self.rejections >= self.factor.deny_count

    def in_words(self) -> str:
        noun = self.factor.label if self.factor.count == 1 else _plural(self.factor.label)
        return f"{min(len(self.approvers), self.factor.count)} of {self.factor.count} {noun}"


@dataclass(frozen=True)
class PolicyProgress:
    policy: Policy
    factors: tuple[FactorProgress, ...]

    @property
    def met(self) -> bool:
        return all(f.met for f in self.factors)

    @property
    def vetoed(self) -> bool:
        return any(f.vetoed for f in self.factors)

    def in_words(self) -> str:
        """"1 of 2 peers, 0 of 1 lead" (POL-3)."""
        return ", ".join(f.in_words() for f in self.factors)

    def missing(self) -> tuple[FactorProgress, ...]:
        return tuple(f for f in self.factors if not f.met)


@dataclass(frozen=True)
class Standing:
    """Where a proposal's approval stands: `released` by one alternative, `vetoed`
    (every alternative), or waiting; with the votes that no longer count and why."""

    alternatives: tuple[PolicyProgress, ...]
    stale: tuple[Vote, ...] = ()  # bound to another digest
    expired: tuple[Vote, ...] = ()

    @property
    def released_by(self) -> PolicyProgress | None:
        return next((p for p in self.alternatives if p.met and not p.vetoed), None)

    @property
    def vetoed(self) -> bool:
        return bool(self.alternatives) and all(p.vetoed for p in self.alternatives)

    def in_words(self) -> str:
        return " — or — ".join(f"{p.policy.label}: {p.in_words()}" for p in self.alternatives)


def _plural(label: str) -> str:
    return label + ("es" if label.endswith(("s", "sh", "ch")) else "s")


def counting(votes: Iterable[Vote], *, payload_digest: str, batch_digest: str | None, now: datetime):
    """Split votes into (counting, stale, expired) (POL-2): a vote counts while it is
    bound to the current payload digest (and batch digest) and has not expired."""
    live, stale, expired = [], [], []
    for vote in votes:
        if vote.payload_digest != payload_digest or (batch_digest and vote.batch_digest != batch_digest):
            stale.append(vote)
        elif vote.expires_at <= now:
            expired.append(vote)
        else:
            live.append(vote)
    return live, stale, expired


def assign(policy: Policy, approvers: Iterable[Approver]) -> dict[str, tuple[str, ...]]:
    """The most approvers that can be counted, each for one factor it is eligible for
    and no factor beyond its count (POL-2): a bipartite matching by augmenting paths.

    Returns factor key → approver ids counted for it.
    """
    # The most specific factors first, so that a lead who approves alone is shown as the
    # lead ("0 of 1 peer, 1 of 1 lead"), not as a peer; the matching's size is the same.
    specific = sorted(policy.factors, key=lambda f: -(len(f.eligibility.attributes) + bool(f.eligibility.teams)))
    slots = [(f.key, i) for f in specific for i in range(f.count)]
    factor_of = {f.key: f for f in policy.factors}
    holder: dict[tuple[str, int], Approver] = {}

    def place(approver: Approver, seen: set) -> bool:
        for slot in slots:
            if slot in seen or not factor_of[slot[0]].eligibility.admits(approver):
                continue
            seen.add(slot)
            if slot not in holder or place(holder[slot], seen):
                holder[slot] = approver
                return True
        return False

    for approver in approvers:
        place(approver, set())
    counted: dict[str, list[str]] = {f.key: [] for f in policy.factors}
    for (key, _), approver in sorted(holder.items()):
        counted[key].append(approver.id)
    return {key: tuple(ids) for key, ids in counted.items()}


def progress(policy: Policy, votes: Iterable[Vote], makers: Iterable[str]) -> PolicyProgress:
    """One policy's progress from counting votes (already filtered by `counting`);
    makers count for no factor (FOUR-1); a rejection counts against every factor its
    author is eligible for."""
    makers = set(makers)
    votes = [v for v in votes if v.approver.id not in makers]
    counted = assign(policy, [v.approver for v in votes if v.decision == APPROVE])
    rejecters = [v.approver for v in votes if v.decision == REJECT]
    return PolicyProgress(
        policy,
        tuple(
            FactorProgress(f, counted[f.key], sum(1 for a in rejecters if f.eligibility.admits(a)))
            for f in policy.factors
        ),
    )


def standing(
    alternatives: Iterable[Policy],
    votes: Iterable[Vote],
    *,
    makers: Iterable[str],
    payload_digest: str,
    batch_digest: str | None = None,
    now: datetime,
) -> Standing:
    """Where the approval of a proposal (or batch) stands now (POL-1, POL-2)."""
    makers = frozenset(makers)
    live, stale, expired = counting(votes, payload_digest=payload_digest, batch_digest=batch_digest, now=now)
    return Standing(tuple(progress(p, live, makers) for p in alternatives), tuple(stale), tuple(expired))


def vote_refusal(
    alternatives: Iterable[Policy],
    votes: Iterable[Vote],
    approver: Approver,
    decision: str,
    *,
    makers: Iterable[str],
    payload_digest: str,
    batch_digest: str | None = None,
    now: datetime,
) -> str | None:
    """Why `approver` may not cast `decision` now, as an error code, or None (POL-1, POL-2).

    Codes: ``maker_checker_violation`` (a maker), ``approval_not_eligible`` (no factor
    of any alternative admits them), ``approval_already_given`` (they already have a
    counting vote), ``approval_factor_already_met`` (an approval that would count for
    no factor: every factor they are eligible for is full, e.g. a second peer where one
    peer is needed).
    """
    alternatives = tuple(alternatives)
    if approver.id in set(makers):
        return "maker_checker_violation"
    eligible = [f for p in alternatives for f in p.factors if f.eligibility.admits(approver)]
    if not eligible:
        return "approval_not_eligible"
    live, _, _ = counting(votes, payload_digest=payload_digest, batch_digest=batch_digest, now=now)
    if any(v.approver.id == approver.id for v in live):
        return "approval_already_given"
    if decision == REJECT:
        return None
    before = standing(alternatives, live, makers=makers, payload_digest=payload_digest, batch_digest=batch_digest, now=now)
    with_vote = [*live, Vote(approver, APPROVE, payload_digest, now + timedelta(days=1), batch_digest)]
    after = standing(alternatives, with_vote, makers=makers, payload_digest=payload_digest, batch_digest=batch_digest, now=now)
    gained = any(
        sum(len(f.approvers) for f in b.factors) < sum(len(f.approvers) for f in a.factors)
        for b, a in zip(before.alternatives, after.alternatives, strict=True)
    )
    return None if gained else "approval_factor_already_met"


def eligible_policies(alternatives: Iterable[Policy], approver: Approver) -> tuple[Policy, ...]:
    """The alternatives with a factor that admits `approver` (POL-1)."""
    return tuple(p for p in alternatives if any(f.eligibility.admits(approver) for f in p.factors))


def expiry_for(alternatives: Iterable[Policy], approver: Approver, now: datetime, authorization_expires_at: datetime):
    """When a vote cast now stops counting (POL-2): the shortest time to live of the
    alternatives it can count for (all of them when none admits its author), within
    the authorization expiry — so a vote never outlives any policy it could release."""
    alternatives = tuple(alternatives)
    policies = eligible_policies(alternatives, approver) or alternatives
    return min(vote_expiry(p.ttl_seconds, now, authorization_expires_at) for p in policies)


def vote_expiry(policy_ttl_seconds: int | None, now: datetime, authorization_expires_at: datetime) -> datetime:
    """When a vote cast now stops counting: the policy's time to live, within the
    proposal's authorization expiry (POL-2)."""
    if policy_ttl_seconds is None:
        return authorization_expires_at
    return min(now + timedelta(seconds=policy_ttl_seconds), authorization_expires_at)


# -- routing (POL-3) -------------------------------------------------------------------


@dataclass(frozen=True)
class RouteFacts:
    """What routing reads about an action."""

    component: str  # component definition name
    action_code: str
    protected: bool = False
    irreversible: bool = False
    items: int = 1  # a bulk batch's item count; 1 for a single action


@dataclass(frozen=True)
class Route:
    """A rule: when every given condition holds, these alternative policies apply."""

    policies: tuple[str, ...]
    component: str | None = None
    action_code: str | None = None
    protected: bool | None = None
    irreversible: bool | None = None
    min_items: int | None = None

    def matches(self, facts: RouteFacts) -> bool:
        return (
            (self.component is None or self.component == facts.component)
            and (self.action_code is None or self.action_code == facts.action_code)
            and (self.protected is None or self.protected == facts.protected)
            and (self.irreversible is None or self.irreversible == facts.irreversible)
            and (self.min_items is None or facts.items >= self.min_items)
        )

    def in_words(self) -> str:
        parts = []
        if self.protected:
            parts.append("a protected subject")
        if self.irreversible:
            parts.append("an irreversible action")
        if self.component:
            parts.append(f"component {self.component}")
        if self.action_code:
            parts.append(f"action {self.action_code}")
        if self.min_items:
            parts.append(f"a batch of {self.min_items} or more")
        return " and ".join(parts) or "every action"


# Without configured routes: protected subjects and irreversible actions need the
# stronger policy (POL-4, POL-5); everything else the single second person.
DEFAULT_ROUTES = (
    Route(("two_reviewers",), protected=True),
    Route(("two_reviewers",), irreversible=True),
)


@dataclass(frozen=True)
class ApprovalSettings:
    """An installation's policies and routes (edited as one four-eyes change)."""

    policies: Mapping[str, Policy]
    routes: tuple[Route, ...] = DEFAULT_ROUTES
    emergency_review_seconds: int = 24 * 3600  # POL-6
    notify_webhook_url: str | None = None  # POL-7: approvers' notices also go here (egress rules apply)


DEFAULT_SETTINGS = ApprovalSettings({DEFAULT_POLICY.key: DEFAULT_POLICY, STRONGER_POLICY.key: STRONGER_POLICY})


def route(settings: ApprovalSettings, facts: RouteFacts) -> tuple[tuple[Policy, ...], Route | None]:
    """The alternative policies that apply to an action (POL-3): the first route that
    matches, in order; else the default policy. Returns (policies, the route or None)."""
    for rule in settings.routes:
        if rule.matches(facts):
            return tuple(settings.policies[key] for key in rule.policies), rule
    return (settings.policies.get(DEFAULT_POLICY.key, DEFAULT_POLICY),), None


# -- stored form (JSON) ------------------------------------------------------------------


def policy_to_json(policy: Policy) -> dict[str, Any]:
    return {
        "key": policy.key,
        "label": policy.label,
        "ttl_seconds": policy.ttl_seconds,
        "reason_on_reject": policy.reason_on_reject,
        "factors": [
            {
                "key": f.key,
                "label": f.label,
                "count": f.count,
                "deny_count": f.deny_count,
                "roles": list(f.eligibility.roles),
                "teams": list(f.eligibility.teams),
                "attributes": dict(f.eligibility.attributes),
            }
            for f in policy.factors
        ],
    }


def policy_from_json(data: Mapping[str, Any]) -> Policy:
    return Policy(
        key=data["key"],
        label=data["label"],
        ttl_seconds=data.get("ttl_seconds"),
        reason_on_reject=data.get("reason_on_reject", True),
        factors=tuple(
            Factor(
                key=f["key"],
                label=f["label"],
                count=int(f.get("count", 1)),
                deny_count=int(f.get("deny_count", 1)),
                eligibility=Eligibility(
                    tuple(f.get("roles") or ()),
                    tuple(f.get("teams") or ()),
                    tuple(sorted((f.get("attributes") or {}).items())),
                ),
            )
            for f in data["factors"]
        ),
    )


def route_to_json(rule: Route) -> dict[str, Any]:
    data = {"policies": list(rule.policies)}
    for name in ("component", "action_code", "protected", "irreversible", "min_items"):
        if getattr(rule, name) is not None:
            data[name] = getattr(rule, name)
    return data


def route_from_json(data: Mapping[str, Any]) -> Route:
    return Route(
        policies=tuple(data["policies"]),
        component=data.get("component"),
        action_code=data.get("action_code"),
        protected=data.get("protected"),
        irreversible=data.get("irreversible"),
        min_items=data.get("min_items"),
    )


def settings_to_json(settings: ApprovalSettings) -> dict[str, Any]:
    return {
        "policies": [policy_to_json(p) for p in settings.policies.values()],
        "routes": [route_to_json(r) for r in settings.routes],
        "emergency_review_seconds": settings.emergency_review_seconds,
        "notify_webhook_url": settings.notify_webhook_url,
    }


def settings_from_json(data: Mapping[str, Any]) -> ApprovalSettings:
    policies = {p["key"]: policy_from_json(p) for p in data.get("policies", [])}
    policies.setdefault(DEFAULT_POLICY.key, DEFAULT_POLICY)
    return ApprovalSettings(
        policies,
        tuple(route_from_json(r) for r in data.get("routes", [])),
        int(data.get("emergency_review_seconds", 24 * 3600)),
        data.get("notify_webhook_url") or None,
    )


def route_record(policies: Iterable[Policy], rule: Route | None, facts: RouteFacts) -> dict[str, Any]:
    """What is stored on the proposal (POL-3): the policies that applied, as they were
    when it was prepared, the route that chose them and the facts it read."""
    return {
        "policies": [policy_to_json(p) for p in policies],
        "route": route_to_json(rule) if rule else None,
        "route_words": rule.in_words() if rule else "the default",
        "protected": facts.protected,
        "irreversible": facts.irreversible,
        "items": facts.items,
    }


def policies_of(record: Mapping[str, Any] | None) -> tuple[Policy, ...]:
    """The alternatives recorded on a proposal; a proposal prepared before POL has the
    default policy."""
    if not record:
        return (DEFAULT_POLICY,)
    return tuple(policy_from_json(p) for p in record["policies"])


def settings_problems(data: Any) -> list[str]:
    """What is wrong with an approval settings document, in words (empty when valid).
    A value of the wrong type anywhere makes it malformed, never an exception."""
    try:
        return _settings_problems(data)
    except (TypeError, ValueError, AttributeError, KeyError) as error:
        return [f"The approval settings are malformed ({error.__class__.__name__}: {error})."]


def _settings_problems(data: Any) -> list[str]:
    problems: list[str] = []
    if not isinstance(data, Mapping):
        return ["The approval settings must be an object."]
    try:
        settings = settings_from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        return [f"The approval settings are malformed ({error.__class__.__name__}: {error})."]
    for policy in settings.policies.values():
        if not 1 <= len(policy.factors) <= MAX_FACTORS:
            problems.append(f"Policy {policy.key} needs 1 to {MAX_FACTORS} factors.")
        if policy.ttl_seconds is not None and not TTL_MIN_SECONDS <= policy.ttl_seconds <= TTL_MAX_SECONDS:
            problems.append(f"Policy {policy.key}: the time to live must be {TTL_MIN_SECONDS} s to 30 days.")
        keys = [f.key for f in policy.factors]
        if len(set(keys)) != len(keys):
            problems.append(f"Policy {policy.key}: factor keys must be distinct.")
        for f in policy.factors:
            if not 1 <= f.count <= MAX_COUNT or not 1 <= f.deny_count <= MAX_COUNT:
                problems.append(f"Policy {policy.key}, factor {f.key}: counts must be 1 to {MAX_COUNT}.")
            if not (f.eligibility.roles or f.eligibility.teams or f.eligibility.attributes):
                problems.append(f"Policy {policy.key}, factor {f.key}: say who is eligible.")
            if f.eligibility.roles and DECIDER_ROLE not in f.eligibility.roles:
                problems.append(
                    f"Policy {policy.key}, factor {f.key}: only reviewers approve actions (APPR-4); include"
                    " the reviewer role and narrow the factor by team or attribute."
                )
    for index, rule in enumerate(settings.routes, start=1):
        unknown = [key for key in rule.policies if key not in settings.policies]
        if not rule.policies or unknown:
            problems.append(f"Route {index} names no policy or an unknown one ({', '.join(unknown)}).")
    if not 3600 <= settings.emergency_review_seconds <= 14 * 24 * 3600:
        problems.append("The emergency review is due within 1 hour to 14 days.")
    return problems
