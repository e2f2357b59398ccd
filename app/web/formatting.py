"""Formatting helpers shared by views and templates."""

from __future__ import annotations

import json

from markupsafe import Markup

from app.domain.clock import iso


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def bidi_text(value) -> Markup:
    """``<bdi>value</bdi>`` with `value` escaped: platform text isolated from the page's
    direction (FOUR-10). The `platform_text` of templates/_macros/platform.html."""
    return Markup("<bdi>{}</bdi>").format(value)


def time_tag(value) -> Markup:
    """A <time> element: UTC in the page, the operator's local time once console.js runs."""
    if value is None:
        return Markup("—")
    stamp = iso(value)  # digits and punctuation only: nothing to escape
    return Markup(f'<time datetime="{stamp}" title="{stamp} UTC">{value.strftime("%Y-%m-%d %H:%M:%S")} UTC</time>')
