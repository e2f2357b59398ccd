"""The proposal page's attempt and audit rows as Python (issue 25 speed;
app/web/badges.py `attempt_row`, `audit_row`): each writes what the template's loop
body wrote. The loop bodies as they were are kept here and rendered beside them,
hostile values included."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace as NS

import pytest

EVIL = '<b>"x"&\'y\'</b>'
AT = datetime(2026, 12, 3, 9, 30, 5, tzinfo=timezone.utc)

ATTEMPT_ROW = """{% set PURPOSE_LABELS = {'update': 'update', 'read-back': 'read-back', 'recheck': 'read-back before resend'} %}\
{% set PURPOSE_TITLES = {'update': 'The request that makes the change.', 'read-back': 'Reads the platform to confirm the change (PLAT-2).', 'recheck': 'A later attempt reads the platform first and sends the update only if the change is not there yet.'} %}\
<tr><td data-label="#">{{ a.attempt_number }}</td>
        <td data-label="Request" class="request"><span title="{{ PURPOSE_TITLES.get(a.purpose, '') }}">{{ PURPOSE_LABELS.get(a.purpose, a.purpose) }}</span>: {{ a.method }} <code class="url" title="{{ a.url }}">{{ a.url }}</code></td>
        <td data-label="When">{{ a.started_at|time }}<br><small>{% if a.finished_at %}{{ a.duration_ms ~ ' ms' if a.duration_ms is not none else 'finished' }}{% elif status == 'abandoned' %}<strong title="The worker stopped before recording an answer; a later claim took over.">abandoned</strong>{% else %}in flight{% endif %}</small></td>
        <td data-label="Outcome" class="outcome">{% if a.error_code %}{{ error_words(a.error_code, a.response_status, a.response_excerpt) }}{% if a.detail %} <small class="detail">{{ a.detail }}</small>{% endif %}{% elif a.response_status %}HTTP {{ a.response_status }}{% else %}—{% endif %}{% if a.response_class %} <small class="code" title="response class">{{ a.response_class }}</small>{% endif %}</td>
        <td data-label="Digests" class="digests"><code title="request {{ a.request_digest }}">{{ a.request_digest[7:19] }}</code><br><code title="response {{ a.response_digest or '' }}">{{ (a.response_digest or '—')[7:19] }}</code></td></tr>"""

AUDIT_ROW = """<li><span class="seq">#{{ e.seq }}</span> {{ e.created_at|time }} <strong>{{ e.action }}</strong>
      by {{ d.actors.get(e.actor_id, e.actor_type) if e.actor_type == 'operator' else e.actor_type }}
      <details><summary>details</summary><pre><code>{{ e.details_json }}</code></pre></details></li>"""


def attempt(**given):
    values = dict(attempt_number=3, purpose="update", method="POST", url="https://platform.example/a?b=1&c=2",
                  started_at=AT, finished_at=AT, duration_ms=12, error_code=None, response_status=200,
                  response_excerpt=None, detail=None, response_class="success",
                  request_digest="sha256:" + "a" * 64, response_digest="sha256:" + "b" * 64)
    return NS(**{**values, **given})


ATTEMPTS = [
    (attempt(), None),
    (attempt(duration_ms=None), None),
    (attempt(duration_ms=0), None),
    (attempt(finished_at=None, response_status=None, response_class=None, response_digest=None), "in_flight"),
    (attempt(finished_at=None, response_status=None, response_class=None, response_digest=None), "abandoned"),
    (attempt(purpose="read-back", error_code="platform_server_error", response_status=503,
             response_excerpt=EVIL, detail=EVIL, response_class="server_error"), None),
    (attempt(purpose="recheck", error_code="connection_failed", response_status=None, response_class=None), None),
    (attempt(purpose=EVIL, method=EVIL, url=EVIL, request_digest=EVIL, response_digest=EVIL,
             response_class=EVIL, attempt_number=EVIL, error_code=EVIL, detail=EVIL), None),
    (attempt(response_status=None, response_class=None), None),
]
ACTORS = {"op_1": "Ann", "op_2": EVIL}
EVENTS = [
    NS(seq=7, created_at=AT, action="action.approved", actor_type="operator", actor_id="op_1", details_json='{"a": 1}'),
    NS(seq=8, created_at=AT, action=EVIL, actor_type="operator", actor_id="op_2", details_json=EVIL),
    NS(seq=9, created_at=AT, action="action.delivered", actor_type="operator", actor_id="op_gone", details_json="{}"),
    NS(seq=10, created_at=AT, action="action.delivered", actor_type="system", actor_id=None, details_json="{}"),
    NS(seq=11, created_at=AT, action="x", actor_type=EVIL, actor_id="op_1", details_json="{}"),
]


def render(app, source: str, **values) -> str:
    with app.test_request_context("/"):
        return app.jinja_env.from_string('{% from "_macros/ui.html" import error_words %}' + source).render(**values)


@pytest.mark.parametrize("index", range(len(ATTEMPTS)))
def test_an_attempt_row_writes_what_the_template_wrote(app, index):
    a, status = ATTEMPTS[index]
    assert render(app, "{{ attempt_row(a, status) }}", a=a, status=status) == render(app, ATTEMPT_ROW, a=a, status=status)


@pytest.mark.parametrize("index", range(len(EVENTS)))
def test_an_audit_row_writes_what_the_template_wrote(app, index):
    e, d = EVENTS[index], NS(actors=ACTORS)
    assert render(app, "{{ audit_row(e, d.actors) }}", e=e, d=d) == render(app, AUDIT_ROW, e=e, d=d)
