"""Formatting helpers shared by views and templates."""

from __future__ import annotations

import json

from markupsafe import Markup, escape

from app.domain.clock import iso
from app.domain.personal_data import erased_words
from app.domain.subject_names import SubjectName, title_parts


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def bidi_text(value) -> Markup:
    """``<bdi>value</bdi>`` with `value` escaped: platform text isolated from the page's
    direction (FOUR-10). The `platform_text` of templates/_macros/platform.html."""
    return Markup(f"<bdi>{escape(value)}</bdi>")  # Markup.format parses its format string in Python


def action_heading(label: str, subject: SubjectName) -> Markup:
    """An action's title for a heading: the parts escaped, the account's name (the
    platform's text) in <bdi> (FOUR-10, QUEUE-6); `action_title` is the plain-text twin."""
    before, name, after = title_parts(label, subject)
    return Markup("{}{}{}").format(before, bidi_text(name) if name else "", after)


def time_tag(value) -> Markup:
    """A <time> element: UTC in the page, the operator's local time once console.js runs."""
    if value is None:
        return Markup("—")
    stamp = iso(value)  # digits and punctuation only: nothing to escape
    shown = f"{stamp[:10]} {stamp[11:19]}" if len(stamp) == 24 else stamp[:-5].replace("T", " ")  # a year < 1000
    return Markup(f'<time datetime="{stamp}" title="{stamp} UTC">{shown} UTC</time>')


def erased_note(row) -> Markup:
    """"Erased on <time>, by request" (or "by retention") for a row whose personal data
    was erased (SPEC OPS-4): `row` has ``erased_at`` and ``erased_reason``."""
    reason = row.erased_reason or ""
    return Markup('<span class="erased" data-erased="{}">Erased on {}, {}</span>').format(
        reason, time_tag(row.erased_at), erased_words(reason))
