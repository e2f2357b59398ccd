"""The proposals list's row, `proposal_state` and `undo_link` as Python (issue 25
speed; app/web/badges.py): each writes what the template wrote. The row template
and the two macros as they were are kept here and rendered beside them, hostile
values included."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace as NS

import pytest

from app.services.read.review import UndoMark

EVIL = '<b>"x"&\'y\'</b>'
AT = datetime(2026, 12, 3, 9, 30, 5, tzinfo=timezone.utc)

MACROS = """{% macro proposal_state(p, undo=None) -%}
{% if undo and undo.done -%}
<span class="badge state-undone" title="state: {{ p.state }}">Undone</span>
<span class="undo">by {{ undo_link(undo) }}</span>
{%- else -%}
{{ state_badge(p.state, p.delivery_terminal) }}{% if undo %} <span class="undo">· being undone by {{ undo_link(undo) }}</span>{% endif %}
{%- endif %}
{%- endmacro %}

{% macro undo_link(undo) -%}
{% if undo.via == 'compensation' -%}
<a href="{{ url_for('console.proposal', proposal_id=undo.proposal_id) }}">compensation: {{ label('action', undo.action_code) }}</a>
{%- else -%}
<a href="{{ url_for('console.appeal', appeal_id=undo.appeal_id) }}">appeal correction</a>{% if undo.proposal_id %} (<a href="{{ url_for('console.proposal', proposal_id=undo.proposal_id) }}">{{ label('action', undo.action_code) }}</a>){% endif %}
{%- endif %}
{%- endmacro %}
{% from "_macros/ui.html" import time, delivery_summary, error_words, subject, state_badge %}"""

ROW = MACROS + """{% set p = row.proposal %}<tr>
  <td data-label="Created">{{ time(p.created_at) }}</td>
  <td data-label="Action"><a href="{{ row_url('console.proposal', 'proposal_id', p.id) }}" title="{{ p.action_code }}">{{ label('action', p.action_code) }}</a></td>
  <td data-label="Target">{{ subject(p, names) }}</td>
  <td data-label="Report"><a href="{{ row_url('console.report', 'report_id', p.report_id) }}">{{ row.report_reference }}</a></td>
  <td data-label="State">{{ proposal_state(p, undo.get(p.id)) }}</td>
  <td data-label="Delivery">{{ delivery_summary(p) }}</td>
  <td data-label="Last error">{{ error_words(p.last_error_code) }}</td>
</tr>"""

UNDOS = [
    None,
    UndoMark(True, "compensation", "prop_9", None, "restore_content", "applied"),
    UndoMark(False, "compensation", "prop_9", None, EVIL, "queued"),
    UndoMark(True, "correction", "prop_9", "apl_1", "restore_content", "confirmed"),
    UndoMark(False, "correction", None, "apl_1", None, "open"),
]


def proposal(**given):
    values = dict(id="prop_1", created_at=AT, action_code="remove_content", target={"reference": "post:1"},
                  report_id="rep_1", state="failed", delivery_terminal=False, delivery_attempt_count=2,
                  delivery_cycle=1, last_error_code="platform_server_error")
    return NS(**{**values, **given})


PROPOSALS = [
    proposal(),
    proposal(state="applied", last_error_code=None, delivery_terminal=True),
    proposal(action_code=EVIL, state=EVIL, last_error_code=EVIL, target={"reference": EVIL}),
]


def render(app, source: str, **values) -> str:
    with app.test_request_context("/"):
        return app.jinja_env.from_string(source).render(**values).strip()


@pytest.mark.parametrize("undo", range(len(UNDOS)))
@pytest.mark.parametrize("index", range(len(PROPOSALS)))
def test_a_proposals_list_row_writes_what_the_template_wrote(app, index, undo):
    values = dict(row={"proposal": PROPOSALS[index], "report_reference": EVIL if index == 2 else "r-1"}, names=None,
                  undo={"prop_1": UNDOS[undo]} if UNDOS[undo] else {})
    assert render(app, "{{ proposal_row(row, names, undo) }}", **values) == render(app, ROW, **values)


@pytest.mark.parametrize("undo", range(len(UNDOS)))
def test_proposal_state_writes_what_its_macro_wrote(app, undo):
    values = dict(p=PROPOSALS[0], mark=UNDOS[undo], d={"state": EVIL, "delivery_terminal": True})
    new = '{% from "_macros/ui.html" import proposal_state %}'
    for call in ("{{ proposal_state(p, mark) }}", "{{ proposal_state(d, mark) }}"):
        assert render(app, new + call, **values) == render(app, MACROS + call, **values)
