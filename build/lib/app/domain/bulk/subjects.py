"""A pasted or uploaded list of subjects, checked line by line (SPEC BULK-1).

The moderator gives one reference per line, or a CSV file with a ``reference`` column
(and optionally a ``kind`` column). Every line is answered on its own: a reference the
intake would refuse, one with characters that would make it look like another
(FOUR-10), a subject named twice, a kind that is no kind, the lines past the cap. Any
error means the caller stores nothing. Pure: no Flask, no database.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from ..evidence import REFERENCE_PATTERN
from ..platform_kinds import PDS_ACCOUNT, PDS_RECORD
from ..text_safety import reference_problem

MAX_SELECTION_CHARS = 1_000_000  # a pasted list or an uploaded file, in characters (10,000 at-uris fit)
MAX_EXCERPT = 120  # characters of a refused line shown back
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,49}")
INTAKE_DEFAULT_KIND = "content"  # what the intake stores when a platform sends no kind
REFERENCE_COLUMN, KIND_COLUMN = "reference", "kind"
# Only these are trimmed around a line or a cell: any other space is shown, and refused
# as a character that hides what the reference is (FOUR-10).
TRIMMED = " \t\r"

INVALID = "bulk_reference_invalid"
SUSPICIOUS = "bulk_reference_suspicious"
DUPLICATE = "bulk_subject_duplicate"
OVER_CAP = "bulk_selection_over_cap"
KIND_INVALID = "bulk_kind_invalid"
TOO_LARGE = "bulk_selection_too_large"
EMPTY = "bulk_selection_empty"


@dataclass(frozen=True)
class SubjectLine:
    """One subject of the list.

    Attributes:
        line: its 1-based line number in the input (for CSV, the data row's line).
        reference: as the platform names it, trimmed.
        kind: the CSV's ``kind`` cell when given, else `subject_kind` of the reference.
    """

    line: int
    reference: str
    kind: str


@dataclass(frozen=True)
class LineError:
    """Why one line (or, on line 0, the whole selection) is refused.

    Attributes:
        line: the 1-based line number; 0 for the selection as a whole.
        excerpt: the line as given, shortened to 120 characters (templates escape it).
        code: ``bulk_reference_invalid``, ``bulk_reference_suspicious``,
            ``bulk_subject_duplicate``, ``bulk_selection_over_cap``, ``bulk_kind_invalid``;
            on line 0 ``bulk_selection_too_large`` or ``bulk_selection_empty``.
        message: a sentence a moderator understands.
    """

    line: int
    excerpt: str
    code: str
    message: str


def subject_kind(reference: str) -> str:
    """The kind of subject a reference names, as report targets carry it (BULK-1).

    Args:
        reference: a reference in the intake's form (``post:1001``, ``did:plc:abc``,
            ``at://did:plc:abc/app.bsky.feed.post/3k``).

    Returns:
        ``account`` for a DID and ``record`` for an at-uri of a record (the PDS subject
        kinds; a bare ``at://did:...`` is the account), else the prefix before the first
        ``:`` in lower case (``post``, ``user``) when it is a valid kind, else
        ``content`` (the intake's default).
    """
    if reference.startswith("did:"):
        return PDS_ACCOUNT
    if reference.startswith("at://"):
        return PDS_RECORD if "/" in reference[len("at://") :].strip("/") else PDS_ACCOUNT
    prefix = reference.split(":", 1)[0].lower()
    return prefix if KIND_PATTERN.fullmatch(prefix) else INTAKE_DEFAULT_KIND


def canonical_reference(reference: str) -> str:
    """One spelling per subject (BULK-1, BULK-2): the part before the first ``:`` in
    lower case (a scheme is case-insensitive), and an at-uri naming only an account
    (``at://did:plc:abc``) as that account's DID. Duplicates, the protected list and
    "already acted on" compare this form, so another spelling of a subject is the same
    subject."""
    text = reference.strip()
    if text[:5].lower() == "at://":
        rest = text[5:].rstrip("/")
        if "/" not in rest and rest[:4].lower() == "did:":
            text = rest
        else:
            return "at://" + text[5:]
    scheme, colon, rest = text.partition(":")
    return scheme.lower() + colon + rest


def reference_error(reference: str) -> tuple[str, str] | None:
    """Whether the intake would refuse `reference` as a subject (BULK-1, FOUR-10).

    Args:
        reference: the reference, trimmed.

    Returns:
        ``(code, message)``: ``bulk_reference_suspicious`` for a lookalike, invisible or
        bidirectional character (named with its position), ``bulk_reference_invalid``
        for anything not of the form ``type:id``; None when it is accepted.
    """
    problem = reference_problem(reference, "The reference")
    if problem:
        return SUSPICIOUS, problem
    if not REFERENCE_PATTERN.fullmatch(reference):
        return INVALID, (
            "This is not a subject reference: write it as the platform names it, a type, a colon and an id "
            "without spaces, e.g. post:1001 or user:42 (at most 491 characters)."
        )
    return None


def excerpt(line: str) -> str:
    """`line` shortened to 120 characters, an ellipsis marking a cut."""
    return line if len(line) <= MAX_EXCERPT else line[: MAX_EXCERPT - 1] + "…"


def _is_skipped(line: str) -> bool:
    text = line.strip(TRIMMED)
    return not text or text.startswith("#")


def _csv_columns(line: str) -> dict[str, int] | None:
    """The header's columns, when `line` is a CSV header with a ``reference`` column."""
    cells = _cells(line)
    names = [cell.strip(TRIMMED).lower() for cell in cells or []]
    if REFERENCE_COLUMN not in names:
        return None
    return {name: names.index(name) for name in (REFERENCE_COLUMN, KIND_COLUMN) if name in names}


def _cells(line: str) -> list[str] | None:
    try:
        return next(csv.reader([line], strict=True), [])
    except csv.Error:
        return None


class _Reader:
    """Turns lines into subjects and errors, remembering first lines and the cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.subjects: list[SubjectLine] = []
        self.errors: list[LineError] = []
        self.first_line: dict[str, int] = {}
        self.over_cap_at: tuple[int, str] | None = None  # the first line past the cap

    def refuse(self, number: int, line: str, code: str, message: str) -> None:
        self.errors.append(LineError(number, excerpt(line), code, message))

    def take(self, number: int, line: str, reference: str, kind: str | None) -> None:
        """Check one line's reference and kind (None: derive it) and keep it or refuse it."""
        problem = reference_error(reference) if reference else (INVALID, "This line names no reference.")
        if problem:
            self.refuse(number, line, *problem)
            return
        if kind and not KIND_PATTERN.fullmatch(kind):
            self.refuse(
                number, line, KIND_INVALID,
                "The kind must be a lower-case word of letters, digits and underscores (at most 50), e.g. post.",
            )
            return
        reference = canonical_reference(reference)
        first = self.first_line.setdefault(reference, number)
        if first != number:
            self.refuse(number, line, DUPLICATE, f"This subject is already named on line {first:,}.")
            return
        if len(self.first_line) > self.cap:
            self.over_cap_at = self.over_cap_at or (number, line)
            return
        self.subjects.append(SubjectLine(number, reference, kind or subject_kind(reference)))

    def finish(self) -> tuple[list[SubjectLine], list[LineError]]:
        if self.over_cap_at is not None:
            number, line = self.over_cap_at
            self.refuse(
                number, line, OVER_CAP,
                f"This selection names {len(self.first_line):,} subjects; at most {self.cap:,} may be acted on "
                f"at once. This line is the first past the cap: split the list, or ask an admin for a larger cap.",
            )
            self.errors.sort(key=lambda error: error.line)
        if not self.subjects and not self.errors:
            self.refuse(0, "", EMPTY, "The selection names no subject: give one reference per line.")
        return self.subjects, self.errors


def parse_subject_list(text: str, *, cap: int) -> tuple[list[SubjectLine], list[LineError]]:
    """Read a pasted or uploaded list of subjects, answering each line (SPEC BULK-1).

    Args:
        text: one reference per line, or CSV whose first line (neither blank nor a
            comment) is a header with a ``reference`` column and optionally a ``kind``
            column (other columns are ignored). Blank lines and lines starting with
            ``#`` are skipped; Windows line endings and a UTF-8 byte-order mark are
            accepted. At most 1,000,000 characters.
        cap: the most distinct subjects one bulk action may name (the role's cap, BULK-5).

    Returns:
        ``(subjects, errors)``: the subjects in input order, at most `cap` of them, and
        every refused line in line order: ``bulk_reference_invalid`` /
        ``bulk_reference_suspicious`` (the intake's reference rule and FOUR-10),
        ``bulk_kind_invalid``, ``bulk_subject_duplicate`` (naming the first line),
        one ``bulk_selection_over_cap`` at the first line past the cap; on line 0
        ``bulk_selection_too_large`` or ``bulk_selection_empty``. Any error means
        nothing may be stored.
    """
    if len(text) > MAX_SELECTION_CHARS:
        message = (
            f"The selection has {len(text):,} characters; at most {MAX_SELECTION_CHARS:,} are read at once. "
            "Split it into several bulk actions."
        )
        return [], [LineError(0, "", TOO_LARGE, message)]
    lines = text.removeprefix("\ufeff").split("\n")
    reader = _Reader(cap)
    columns, first = None, True
    for number, raw in enumerate(lines, start=1):
        line = raw.removesuffix("\r")
        if _is_skipped(line):
            continue
        if first:
            first, columns = False, _csv_columns(line)
            if columns is not None:
                continue
        if columns is None:
            reader.take(number, line, line.strip(TRIMMED), None)
            continue
        cells = _cells(line)
        if cells is None:
            reader.refuse(number, line, INVALID, "This line is not a CSV row: check its quotes.")
            continue
        reference = _cell(cells, columns.get(REFERENCE_COLUMN))
        reader.take(number, line, reference, _cell(cells, columns.get(KIND_COLUMN)) or None)
    return reader.finish()


def _cell(cells: list[str], index: int | None) -> str:
    return cells[index].strip(TRIMMED) if index is not None and index < len(cells) else ""
