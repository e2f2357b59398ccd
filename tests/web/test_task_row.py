"""The approval tasks page's row and the maker line as Python (issue 25 speed;
app/web/badges.py `task_row`, `maker_line`): each writes what the template wrote.
The row template and the maker_line macro as they were are kept here and rendered
beside them, hostile values included."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace as NS

import pytest

from app.services.read.approving import MakerLine

EVIL = '<b>"x"&\'y\'</b>'
AT = datetime(2026, 12, 3, 9, 30, 5, tzinfo=timezone.utc)

MAKER_LINE = """{% macro maker_line(m, short=False) -%}
{%- set quote = m.short_quote() if short else m.quote -%}
{{ m.label }} — {{ m.verb }} <bdi>{{ m.name or 'someone no longer listed' }}</bdi>{% if quote %} — “<bdi>{{ quote }}</bdi>”{% endif %}{% if m.note %} — {{ m.note }}{% endif %}
{%- endmacro %}"""

TASK_ROW = MAKER_LINE + """{% from "_macros/ui.html" import time, coded, subject %}
{% from "_macros/platform.html" import platform_text %}
{% set t = row.task %}{% set p = row.proposal %}{% set rv = reviews.get(p.id) if p else none %}
<tr data-task="{{ t.id }}"{% if row.claim.shown and not row.claim.allowed %} class="not-yours"{% endif %}>
  <td data-label="Due">{{ time(t.due_at) }}</td>
  <td data-label="Action">{% if p %}<a href="{{ row_url('console.proposal', 'proposal_id', p.id) }}" title="{{ p.action_code }}">{{ label('action', p.action_code) }}</a>{% set a = approving.get(p.id) %}
    {% if a and a.maker %}<br><small class="maker">{{ maker_line(a.maker, short=True) }}</small>{% endif %}
    {% if a and a.host %}<br><small class="destination">Sends to <strong class="destination-host">{{ a.host }}</strong></small>{% endif %}{% endif %}</td>
  <td data-label="Target">{% if p %}{{ subject(p, names) }}{% endif %}</td>
  <td data-label="What was reported">{% if rv and rv.evidence %}{% set e = rv.evidence[0] %}
    <span class="excerpt">“{{ platform_text((e.content_text or '')|truncate(140)) }}”</span>
    <small>by {{ platform_text(e.author_name or e.author_reference or 'an unknown author') }}{% if rv.other_reports %} · {{ rv.other_reports }} other report{{ 's' if rv.other_reports != 1 }} about content by this author{% endif %}</small>
    {% else %}<span class="empty">no evidence sent</span>{% endif %}</td>
  <td data-label="State">{{ coded('task_state', t.state) }}</td>
  <td data-label="Claimed by">{{ row.assignee or '—' }}</td>
  <td data-label="Claim">{% if row.claim.allowed %}
    <form method="post" action="{{ row_url('console.claim', 'task_id', t.id) }}" hx-post="{{ row_url('console.claim', 'task_id', t.id) }}" hx-target="closest tr" hx-swap="outerHTML">{{ form.csrf_token }}<button type="submit">Claim</button></form>
    {% elif row.claim.shown %}
    <p class="not-yours-note" data-not-yours="true"><strong>Not yours to decide.</strong> {{ row.claim.reason }}</p>
    {% elif row.release.allowed %}
    <form method="post" action="{{ row_url('console.release', 'task_id', t.id) }}" hx-post="{{ row_url('console.release', 'task_id', t.id) }}" hx-target="closest tr" hx-swap="outerHTML">{{ form.csrf_token }}<button type="submit">Release</button></form>
    {% else %}—{% endif %}</td>
</tr>"""

HIDDEN, OPEN = NS(shown=False, allowed=False, reason=None), NS(shown=True, allowed=True, reason=None)
MAKERS = [
    MakerLine("Remove content", "by", "Maya", "threat of harm " * 20),
    MakerLine(EVIL, EVIL, EVIL, EVIL, EVIL),
    MakerLine("Compensation", "proposed by", None, None, "undoes Take the content down"),
    MakerLine("Remove content", "by", "", ""),
]


def task_row(proposal=True, claim=OPEN, release=HIDDEN, assignee=None, task_id="task_1", due_at=AT,
             state="open", action_code="remove_content"):
    p = NS(id="prop_1", action_code=action_code, target={"reference": "post:1"}) if proposal else None
    return {"task": NS(id=task_id, due_at=due_at, state=state), "proposal": p, "assignee": assignee,
            "claim": claim, "release": release}


def evidence(text="the post", author_name="Ann", author_reference="user:1", other_reports=0):
    return {"prop_1": NS(evidence=[NS(content_text=text, author_name=author_name, author_reference=author_reference)],
                         other_reports=other_reports)}


CASES = [
    (task_row(), {}, {}),
    (task_row(proposal=False, claim=HIDDEN, due_at=None), {}, {}),
    (task_row(claim=NS(shown=True, allowed=False, reason=EVIL)), {}, {}),
    (task_row(claim=HIDDEN, release=NS(shown=True, allowed=True), assignee=EVIL, state="claimed"), {}, {}),
    (task_row(claim=HIDDEN, assignee="Bo", state="claimed"), {}, {}),
    (task_row(task_id=EVIL, state=EVIL, action_code=EVIL), {}, {}),
    (task_row(), evidence(), {"prop_1": NS(maker=MAKERS[0], host="platform.example")}),
    (task_row(), evidence(EVIL * 20, EVIL, EVIL, 1), {"prop_1": NS(maker=MAKERS[1], host=EVIL)}),
    (task_row(), evidence(None, None, None, 3), {"prop_1": NS(maker=MAKERS[2], host=None)}),
    (task_row(), evidence("", "", "user:2"), {"prop_1": NS(maker=MAKERS[3], host=None)}),
    (task_row(), {"prop_1": NS(evidence=[], other_reports=2)}, {"prop_1": NS(maker=None, host="h")}),
]


def render(app, source: str, **values) -> str:
    from app.web.forms import ConsoleForm

    with app.test_request_context("/"):
        return app.jinja_env.from_string(source).render(form=ConsoleForm(), names=None, **values).strip()


@pytest.mark.parametrize("index", range(len(CASES)))
def test_a_task_row_writes_what_the_template_wrote(app, index):
    row, reviews, approving = CASES[index]
    values = dict(row=row, reviews=reviews, approving=approving)
    assert render(app, "{{ task_row(row, names, reviews, approving, form) }}", **values) == render(app, TASK_ROW, **values)


@pytest.mark.parametrize("index", range(len(MAKERS)))
@pytest.mark.parametrize("short", [False, True])
def test_maker_line_writes_what_its_macro_wrote(app, index, short):
    values = dict(m=MAKERS[index], short=short)
    new = '{% from "_macros/review.html" import maker_line %}{{ maker_line(m, short=short) }}'
    assert render(app, new, **values) == render(app, MAKER_LINE + "{{ maker_line(m, short=short) }}", **values)
