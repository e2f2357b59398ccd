"""The console's Jinja template class: macro imports that find the cached module fast.

Jinja 3.1 checks, on every ``{% from ... import ... %}``, whether the importing
context has globals the imported template lacks, by subtracting a ChainMap's keys
view from a set in pure Python (about 25 globals here). A row template included
once per row imports its macros once per row, so a 120-row list paid that check
hundreds of times per page. The same check done by ``set.issubset`` in C gives the
same answer: when no global is new, the cached module is used, as Jinja would.
"""

from __future__ import annotations

from flask import current_app, g, url_for
from jinja2 import Template

_MARK = "QQrowQQ"  # stands for the varying value while the URL is built once


class ConsoleTemplate(Template):
    def _get_default_module(self, ctx=None):
        if ctx is not None and ctx.globals_keys.issubset(self.globals):
            ctx = None  # nothing new to give the module: Jinja's cached module is the answer
        return super()._get_default_module(ctx)


def row_url(endpoint: str, name: str, value) -> str:
    """``url_for(endpoint, **{name: value})`` for a list's rows, at a fraction of the
    cost (issue 25: about 30 µs a call, three per task row): the URL is built once per
    request with a marker for `value`, whose place is then filled with the value
    quoted by the rule's own converter. Same text as `url_for`.

    Args:
        endpoint: an endpoint whose rule has the variable `name` (e.g.
            ``"console.proposal"``, ``"proposal_id"``); other values fall back to
            `url_for`.
        value: the row's value (an id); quoted as the rule quotes it.
    """
    cache = g.setdefault("_row_urls", {})
    parts = cache.get((endpoint, name))
    if parts is None:
        parts = cache[(endpoint, name)] = _url_parts(endpoint, name)
    if parts is False:
        return url_for(endpoint, **{name: value})
    head, to_url, tail = parts
    return head + to_url(value) + tail


def _url_parts(endpoint: str, name: str):
    rules = list(current_app.url_map.iter_rules(endpoint))
    converter = rules[0]._converters.get(name) if len(rules) == 1 else None
    built = url_for(endpoint, **{name: _MARK})
    if converter is None or built.count(_MARK) != 1 or converter.to_url(_MARK) != _MARK:
        return False
    head, _, tail = built.partition(_MARK)
    return head, converter.to_url, tail


def register_templating(app) -> None:
    """Use `ConsoleTemplate` for every template the app loads; `row_url` for lists."""
    app.jinja_env.template_class = ConsoleTemplate
    app.jinja_env.globals["row_url"] = row_url
