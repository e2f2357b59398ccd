"""The transparency report of a period (SPEC §7 DSA-6; DSA Articles 15 and 24).

Pure figures from plain rows: no database, no clock. The read service
(`app.services.read.transparency_report`) gives the same figures from grouped SQL
counts and loaded durations; a test holds the two equal on the same rows.

What is counted, for a period ``[start, end)`` of whole UTC days:

* statements of reasons whose restriction was applied in the period
  (``applied_at``), by category, ground, restriction, restriction type, automated
  decision and automated detection; every value of the API v2 lists is listed,
  also with 0, so two periods compare line by line;
* the time from report to action: for those statements with a report
  (``reported_at``), ``applied_at - reported_at`` in whole seconds (a report received
  after the restriction applied counts as 0 s); its median and 90th percentile;
* appeals (every appeal of the installation: the internal complaint-handling of
  Art. 20 covers decisions to act and not to act): received in the period (filed),
  decided in the period (their one decision made), the median time to decide (filed
  → decided, for those decided in the period), and the decided ones by outcome;
* decisions reversed on appeal: appeal decisions with the outcome ``reversed`` made
  in the period (chosen over the statements' ``reversed_at``: it counts reversals of
  decisions that made no statement too, and it is the same event the appeal figures
  count);
* suspensions (Art. 24(1)(b)): account restrictions of type
  ``DECISION_ACCOUNT_SUSPENDED`` and suspensions of the provision of the service
  (partial or total) applied in the period.

Percentiles use the nearest-rank method: the p-th percentile of n sorted values is
the value at rank ``ceil(p × n / 100)`` (1-based), computed in integers; the median
is the 50th percentile, so with an even count it is the lower of the two middle
values. No values: no percentile (None, shown as "no data").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from . import dsa
from .errors import ApiError

MAX_PERIOD_DAYS = 3660  # ten years: a report's period, not an archive query
FIRST_DAY = date(2000, 1, 1)
PERIOD_INVALID = "transparency_period_invalid"

RESTRICTIONS = {
    dsa.Restriction.VISIBILITY: "Restriction of the visibility of content",
    dsa.Restriction.MONETARY: "Restriction of monetary payments",
    dsa.Restriction.PROVISION: "Restriction of the provision of the service",
    dsa.Restriction.ACCOUNT: "Restriction of the account",
}
DETECTION = {"Yes": "Detected by automated means", "No": "Not detected by automated means"}
APPEAL_OUTCOMES = {"upheld": "Upheld", "modified": "Modified", "reversed": "Reversed"}
ACCOUNT_SUSPENSION = "DECISION_ACCOUNT_SUSPENDED"
PROVISION_SUSPENSIONS = ("DECISION_PROVISION_PARTIAL_SUSPENSION", "DECISION_PROVISION_TOTAL_SUSPENSION")
# The database's two "Other restriction (please specify)" read the same; the report
# names which restriction each one is.
OTHER_TYPES = {
    "DECISION_VISIBILITY_OTHER": "Other restriction of the visibility of content",
    "DECISION_MONETARY_OTHER": "Other restriction of monetary payments",
}
ALL_RESTRICTION_TYPES = {
    code: OTHER_TYPES.get(code, words) for types in dsa.RESTRICTION_TYPES.values() for code, words in types.items()
}


# -- the period --------------------------------------------------------------------


@dataclass(frozen=True)
class Period:
    """Whole UTC days from `start` (included) to `end` (not included)."""

    start: date
    end: date

    @property
    def starts_at(self) -> datetime:
        """Midnight UTC at the start of `start`."""
        return datetime.combine(self.start, time(0), tzinfo=UTC)

    @property
    def ends_at(self) -> datetime:
        """Midnight UTC at the start of `end` (the first moment not in the period)."""
        return datetime.combine(self.end, time(0), tzinfo=UTC)

    @property
    def last_day(self) -> date:
        """The last day in the period."""
        return self.end - timedelta(days=1)

    def holds(self, moment: datetime | None) -> bool:
        """Whether the aware datetime `moment` is in ``[starts_at, ends_at)``."""
        return moment is not None and self.starts_at <= moment < self.ends_at


def last_full_month(today: date) -> Period:
    """The calendar month before the one `today` is in (the page's default period)."""
    first = today.replace(day=1)
    return Period((first - timedelta(days=1)).replace(day=1), first)


def _day(text: str | None, field_name: str, words: str) -> date:
    text = (text or "").strip()
    try:
        if len(text) != 10:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise ApiError(400, PERIOD_INVALID, f"The {words} must be a day written YYYY-MM-DD.", field_name) from None


def parse_period(start: str | None, end: str | None) -> Period:
    """The period a form or query string asks for (DSA-6).

    Args:
        start: the first day, ``YYYY-MM-DD`` (UTC).
        end: the first day after the period, ``YYYY-MM-DD`` (not included).

    Returns:
        The `Period` ``[start, end)``.

    Raises:
        ApiError: 400 ``transparency_period_invalid`` naming the field: a day that is
            not ``YYYY-MM-DD``, before 2000-01-01, an end not after the start, or a
            period longer than `MAX_PERIOD_DAYS`.
    """
    first = _day(start, "from", "first day")
    after = _day(end, "to", "end day")
    if first < FIRST_DAY:
        raise ApiError(400, PERIOD_INVALID, "The first day cannot be before 2000-01-01.", "from")
    if after <= first:
        raise ApiError(400, PERIOD_INVALID, "The end day must come after the first day (it is not included).", "to")
    if (after - first).days > MAX_PERIOD_DAYS:
        raise ApiError(400, PERIOD_INVALID, f"A period is at most {MAX_PERIOD_DAYS} days.", "to")
    return Period(first, after)


# -- rows --------------------------------------------------------------------------


@dataclass(frozen=True)
class StatementGroup:
    """Statements that share every counted value, and how many they are (a plain
    row is a group of one)."""

    category: str
    ground: str
    restriction: str
    restriction_type: str
    automated_decision: str
    automated_detection: bool
    count: int = 1


@dataclass(frozen=True)
class StatementRow:
    """One statement of reasons as the report reads it (`DsaStatement` columns)."""

    category: str
    ground: str
    restriction: str
    restriction_type: str
    automated_decision: str
    automated_detection: bool
    applied_at: datetime
    reported_at: datetime | None = None

    def group(self) -> StatementGroup:
        """This row as a group of one (what `statement_counts` adds up)."""
        return StatementGroup(
            self.category,
            self.ground,
            self.restriction,
            self.restriction_type,
            self.automated_decision,
            bool(self.automated_detection),
        )


@dataclass(frozen=True)
class AppealRow:
    """One appeal: when it was filed, and its decision (time and outcome) if any."""

    created_at: datetime
    decided_at: datetime | None = None
    outcome: str | None = None


# -- figures -----------------------------------------------------------------------


def nearest_rank(values: Sequence[int], percent: int) -> int | None:
    """The `percent`-th percentile of `values` by the nearest-rank method.

    Args:
        values: numbers (seconds), in any order.
        percent: 1..100.

    Returns:
        The value at rank ``ceil(percent × n / 100)`` of the sorted values (1-based,
        in integers: no rounding error), or None when there are none.

    Raises:
        ValueError: `percent` outside 1..100.
    """
    if not 1 <= percent <= 100:
        raise ValueError("percent is 1..100")
    if not values:
        return None
    ordered = sorted(values)
    rank = -(-percent * len(ordered) // 100)
    return ordered[rank - 1]


def seconds_between(earlier: datetime, later: datetime) -> int:
    """Whole seconds from `earlier` to `later` (aware datetimes), never below 0."""
    return max(0, int((later - earlier).total_seconds()))


@dataclass(frozen=True)
class Figure:
    """One line of the report: its key within its section, its label and value.
    `unit` is ``count`` or ``seconds``; a seconds value may be None (no data)."""

    key: str
    label: str
    value: int | None
    unit: str = "count"


@dataclass(frozen=True)
class Section:
    """A table of the report; `chart` says whether the page draws it as bars."""

    key: str
    title: str
    figures: tuple[Figure, ...]
    chart: bool = False

    def value(self, key: str) -> int | None:
        """The value of the figure `key` (KeyError when the section has none)."""
        for figure in self.figures:
            if figure.key == key:
                return figure.value
        raise KeyError(key)


@dataclass(frozen=True)
class TransparencyReport:
    """The figures of a period, section by section (DSA-6)."""

    period: Period
    sections: tuple[Section, ...]

    def section(self, key: str) -> Section:
        """The section `key` (KeyError when there is none)."""
        for section in self.sections:
            if section.key == key:
                return section
        raise KeyError(key)

    def rows(self) -> list[tuple[str, str, str, int | None]]:
        """(section, key, label, value) for every figure: the CSV's lines."""
        return [(s.key, f.key, f.label, f.value) for s in self.sections for f in s.figures]


@dataclass
class StatementCounts:
    """Statements counted by each reported value (a `Counter` per dimension)."""

    total: int = 0
    by: dict[str, Counter] = field(default_factory=lambda: {name: Counter() for name in DIMENSIONS})


DIMENSIONS = ("category", "ground", "restriction", "restriction_type", "automated_decision", "automated_detection")


def statement_counts(groups: Iterable[StatementGroup]) -> StatementCounts:
    """Add up statements by each dimension (DSA-6).

    Args:
        groups: statement groups (plain rows are groups of one; the service passes
            SQL's GROUP BY rows).

    Returns:
        The total and a `Counter` per dimension; detection is keyed ``Yes``/``No``.
    """
    counts = StatementCounts()
    for group in groups:
        counts.total += group.count
        for name in DIMENSIONS:
            value = getattr(group, name)
            key = ("Yes" if value else "No") if name == "automated_detection" else (value or "")
            counts.by[name][key] += group.count
    return counts


def _listed(counter: Counter, labels: Mapping[str, str]) -> tuple[Figure, ...]:
    """Every known value in its documented order (0 included), then values not in
    the list (kept, never dropped: the label says so)."""
    known = [Figure(str(code), words, counter.get(str(code), 0)) for code, words in labels.items()]
    strays = sorted(key for key in counter if key not in {str(code) for code in labels})
    return tuple(known) + tuple(Figure(key, _stray_label(key), counter[key]) for key in strays)


def _stray_label(key: str) -> str:
    return "Not recorded" if not key else "Not in the API v2 list"


def statement_sections(counts: StatementCounts) -> tuple[Section, ...]:
    """The statement tables of the report (counts by value) and the suspensions."""
    by = counts.by
    types = by["restriction_type"]
    account = types.get(ACCOUNT_SUSPENSION, 0)
    provision = sum(types.get(code, 0) for code in PROVISION_SUSPENSIONS)
    return (
        Section("statements", "Statements of reasons", (Figure("total", "Restrictions applied", counts.total),)),
        Section("category", "By category", _listed(by["category"], dsa.STATEMENT_CATEGORIES), chart=True),
        Section("ground", "By ground", _listed(by["ground"], dsa.DECISION_GROUNDS), chart=True),
        Section("restriction", "By restriction", _listed(by["restriction"], RESTRICTIONS), chart=True),
        Section("restriction_type", "By type of restriction", _listed(types, ALL_RESTRICTION_TYPES)),
        Section(
            "automated_decision", "By automated decision", _listed(by["automated_decision"], dsa.AUTOMATED_DECISIONS),
            chart=True,
        ),
        Section("automated_detection", "By automated detection", _listed(by["automated_detection"], DETECTION)),
        Section(
            "suspensions",
            "Suspensions",
            (
                Figure("account", "Accounts suspended", account),
                Figure("provision", "Provision of the service suspended (partly or totally)", provision),
                Figure("total", "Suspensions in all", account + provision),
            ),
        ),
    )


def time_section(durations: Sequence[int]) -> Section:
    """Time from report to action: how many were measured, median and 90th
    percentile (nearest rank), in seconds."""
    return Section(
        "time_to_action",
        "Time from report to action",
        (
            Figure("measured", "Restrictions that followed a report", len(durations)),
            Figure("median_seconds", "Median", nearest_rank(durations, 50), "seconds"),
            Figure("p90_seconds", "90th percentile", nearest_rank(durations, 90), "seconds"),
        ),
    )


def appeal_section(period: Period, appeals: Iterable[AppealRow]) -> Section:
    """Appeals received and decided in `period`, the median time to decide, the
    decided ones by outcome and the decisions reversed on appeal (DSA-6)."""
    received = decided = 0
    waits: list[int] = []
    outcomes: Counter = Counter()
    for appeal in appeals:
        received += period.holds(appeal.created_at)
        if period.holds(appeal.decided_at):
            decided += 1
            waits.append(seconds_between(appeal.created_at, appeal.decided_at))
            outcomes[appeal.outcome or ""] += 1
    by_outcome = tuple(
        Figure(f"decided_{code}", f"Decided: {words}", outcomes.get(code, 0)) for code, words in APPEAL_OUTCOMES.items()
    )
    return Section(
        "appeals",
        "Appeals (complaints)",
        (
            Figure("received", "Appeals received", received),
            Figure("decided", "Appeals decided", decided),
            Figure("median_seconds_to_decide", "Median time to decide", nearest_rank(waits, 50), "seconds"),
            *by_outcome,
            Figure("reversed", "Decisions reversed on appeal", outcomes.get("reversed", 0)),
        ),
    )


def assemble(
    period: Period, counts: StatementCounts, durations: Sequence[int], appeals: Iterable[AppealRow]
) -> TransparencyReport:
    """The report of `period` from statement counts, report-to-action durations
    (seconds) and appeal rows (DSA-6). Returns a `TransparencyReport`."""
    sections = statement_sections(counts)
    return TransparencyReport(
        period, (*sections[:-1], time_section(durations), appeal_section(period, appeals), sections[-1])
    )


def report_of(period: Period, statements: Iterable[StatementRow], appeals: Iterable[AppealRow]) -> TransparencyReport:
    """The report of `period` from plain rows (DSA-6): statements applied in the
    period are counted and timed, appeals as `appeal_section` says.

    Args:
        period: the period.
        statements: statement rows, of any time (those outside are left out).
        appeals: appeal rows, of any time.

    Returns:
        A `TransparencyReport`.
    """
    inside = [row for row in statements if period.holds(row.applied_at)]
    durations = [seconds_between(r.reported_at, r.applied_at) for r in inside if r.reported_at is not None]
    return assemble(period, statement_counts(row.group() for row in inside), durations, appeals)
