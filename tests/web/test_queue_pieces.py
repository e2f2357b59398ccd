"""The queue row's pieces of templates/_macros/queue.html as Python (issue 25 speed):
through the templates they write what the macros wrote (the expected text below was
rendered by the macros before they became Python), every value escaped."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace as NS

import pytest

EVIL = '<b>"x"&\'y\'</b>'
AT = datetime(2026, 12, 3, 9, 30, 5, tzinfo=timezone.utc)


def row(**given):
    values = dict(kind="account", reference="user:1", author_name=None, author_reference=None, overdue=False,
                  due_at=None, claimed_by=None, claimed_by_me=False, claimed_until=None)
    return NS(**{**values, **given})


CASES = [
    ("subject_name(r)", {"r": row()}),
    ("subject_name(r)", {"r": row(kind="post", reference="post:1", author_name="Ann", author_reference="user:1")}),
    ("subject_name(r)", {"r": row(kind=EVIL, reference=EVIL, author_name=EVIL, author_reference=EVIL)}),
    ("subject_name(r)", {"r": row(kind="post", reference="post:1", author_reference="user:9")}),
    ("subject_name(r)", {"r": row(reference="user:1", author_name="Ann", author_reference="user:1")}),
    ("subject_name(r)", {"r": row(reference="user:1", author_name="", author_reference="user:1")}),
    ("words_of('report_reason', [])", {}),
    ("words_of('report_reason', ['spam'])", {}),
    ("words_of('report_reason', ['spam', v, 'harassment'])", {"v": EVIL}),
    ("age(0)", {}), ("age(59)", {}), ("age(3599)", {}), ("age(3600)", {}), ("age(172799)", {}),
    ("age(172800)", {}), ("age(1000000)", {}),
    ("due(r)", {"r": row()}),
    ("due(r)", {"r": row(due_at=AT)}),
    ("due(r)", {"r": row(due_at=AT, overdue=True)}),
    ("claim_words(r)", {"r": row()}),
    ("claim_words(r)", {"r": row(claimed_by="Bo", claimed_until=AT)}),
    ("claim_words(r)", {"r": row(claimed_by=EVIL, claimed_until=AT)}),
    ("claim_words(r)", {"r": row(claimed_by="Bo", claimed_by_me=True, claimed_until=AT)}),
    ("platform_text(v)", {"v": EVIL}),
    ("platform_text(none)", {}),
    ("platform_text(v)", {"v": 3}),
]
EXPECTED = [
    '<span class="subject"><strong>Account</strong> <code class="ref">user:1</code></span>',
    '<span class="subject"><strong>Post</strong> <code class="ref">post:1</code><span class="author"> · <bdi>Ann</bdi> <small>(user:1)</small></span></span>',
    '<span class="subject"><strong>&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</strong> <code class="ref">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</code><span class="author"> · <bdi>&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</bdi></span></span>',
    '<span class="subject"><strong>Post</strong> <code class="ref">post:1</code><span class="author"> ·  <small>(user:9)</small></span></span>',
    '<span class="subject"><strong>Account</strong> <code class="ref">user:1</code><span class="author"> · <bdi>Ann</bdi></span></span>',
    '<span class="subject"><strong>Account</strong> <code class="ref">user:1</code><span class="author"> · </span></span>',
    '—',
    'Spam',
    'Spam, &lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;, Harassment',
    '0 min',
    '0 min',
    '59 min',
    '1 h 0 min',
    '47 h 59 min',
    '2 days',
    '11 days',
    '',
    'due <time datetime="2026-12-03T09:30:05.000Z" title="2026-12-03T09:30:05.000Z UTC">2026-12-03 09:30:05 UTC</time>',
    '<strong class="overdue">overdue</strong> since <time datetime="2026-12-03T09:30:05.000Z" title="2026-12-03T09:30:05.000Z UTC">2026-12-03 09:30:05 UTC</time>',
    'Unclaimed',
    'Claimed by Bo until <time datetime="2026-12-03T09:30:05.000Z" title="2026-12-03T09:30:05.000Z UTC">2026-12-03 09:30:05 UTC</time>',
    'Claimed by &lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt; until <time datetime="2026-12-03T09:30:05.000Z" title="2026-12-03T09:30:05.000Z UTC">2026-12-03 09:30:05 UTC</time>',
    'Claimed by you until <time datetime="2026-12-03T09:30:05.000Z" title="2026-12-03T09:30:05.000Z UTC">2026-12-03 09:30:05 UTC</time>',
    '<bdi>&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</bdi>',
    '<bdi>None</bdi>',
    '<bdi>3</bdi>',
]


def render(app, call: str, values: dict) -> str:
    source = ('{% from "_macros/queue.html" import subject_name, words_of, age, due, claim_words %}'
              '{% from "_macros/platform.html" import platform_text %}'
              "{{ " + call + " }}")
    with app.test_request_context("/"):
        return app.jinja_env.from_string(source).render(**values)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_a_queue_piece_writes_what_its_macro_wrote(app, index):
    call, values = CASES[index]
    assert render(app, call, values) == EXPECTED[index]


# -- the whole row and its claim form (app/web/badges.py `queue_row`, `claim_control`) --

CLAIM_CONTROL = """{% macro claim_control(r, claim_form, back, hx_target=None) -%}
{% if current_user.has_role('moderator') and r.state == 'open' %}
{% set action = 'console.queue_release' if r.claimed_by_me else 'console.queue_claim' %}
<form class="inline" method="post" action="{{ row_url(action, 'subject_id', r.id) }}"{% if hx_target %} hx-post="{{ row_url(action, 'subject_id', r.id) }}" hx-target="{{ hx_target }}" hx-swap="outerHTML"{% endif %}>
  {{ claim_form.csrf_token }}<input type="hidden" name="next" value="{{ back }}">
  {% if r.claimed_by_me %}<button type="submit" data-key="claim">Release</button>
  {% elif not r.claimed_by %}<button type="submit" data-key="claim">Claim</button>{% endif %}
</form>
{% endif %}
{%- endmacro %}"""

QUEUE_ROW = CLAIM_CONTROL + """{% from "_macros/queue.html" import subject_name, words_of, age, due, claim_words %}\
{% from "_macros/platform.html" import platform_text %}
<tr id="row-{{ r.id }}"{% if r.overdue %} class="overdue"{% endif %}>
  <td data-label="Subject"><a href="{{ row_url('console.queue_subject', 'subject_id', r.id) }}">{{ subject_name(r) }}</a>
    {% if r.preview %}<br><small class="preview">{{ platform_text(r.preview|truncate(140)) }}</small>{% endif %}</td>
  <td data-label="Open reports">{{ r.open_count }}{% if r.report_count != r.open_count %} <small>of {{ r.report_count }}</small>{% endif %}</td>
  <td data-label="Reasons">{{ words_of('report_reason', r.reasons) }}{% if r.categories %}<br><small>{{ words_of('report_category', r.categories) }}</small>{% endif %}</td>
  <td data-label="Reported">first {{ r.first_reported_at|time }}<br>latest {{ r.last_reported_at|time }}</td>
  {% if r.state == 'open' %}
  <td data-label="Waiting">{{ age(r.age_seconds) }}{% if r.queue_name %} <small>in {{ r.queue_name }}</small>{% endif %}<br>{{ due(r) }}</td>
  <td data-label="Claim">{{ claim_words(r) }} {{ claim_control(r, claim_form, back, hx_target='#row-' ~ r.id) }}</td>
  {% else %}{# QUEUE-4: a decided subject waits for nothing and cannot be claimed #}
  <td data-label="Waiting"><strong>Decided</strong>{% if r.queue_name %} <small>in {{ r.queue_name }}</small>{% endif %}<br><small>last report {{ r.last_reported_at|time }}</small></td>
  <td data-label="Claim"><span class="empty">—</span></td>
  {% endif %}
</tr>"""


def subject_row(**given):
    values = dict(id="sub_1", state="open", preview=None, open_count=2, report_count=2, reasons=["spam"],
                  categories=[], first_reported_at=AT, last_reported_at=AT, age_seconds=4000, queue_name=None)
    return row(**{**values, **given})


ROWS = [
    subject_row(),
    subject_row(preview="a post " * 40, report_count=5, categories=["hate"], queue_name="Main", due_at=AT),
    subject_row(id=EVIL, preview=EVIL, reasons=[EVIL], categories=[EVIL], queue_name=EVIL, overdue=True, due_at=AT,
                claimed_by=EVIL, claimed_until=AT, author_name=EVIL, author_reference="user:2"),
    subject_row(claimed_by="Bo", claimed_by_me=True, claimed_until=AT),
    subject_row(claimed_by="Bo", claimed_until=AT),
    subject_row(state="decided", queue_name="Main", preview="x"),
    subject_row(state="decided", reasons=[], open_count=0),
]


@pytest.mark.parametrize("index", range(len(ROWS)))
@pytest.mark.parametrize("role", ["moderator", "reviewer"])
def test_a_queue_row_writes_what_the_template_wrote(app, index, role):
    from flask_login import current_user, login_user

    from app.web.forms import ConsoleForm

    user = NS(is_authenticated=True, is_active=True, installation_id=None, get_id=lambda: "op_1",
              has_role=lambda wanted: wanted == role)
    values = dict(r=ROWS[index], back=f"/queue?q={EVIL}")
    with app.test_request_context("/"):
        login_user(user)
        form = ConsoleForm()
        new = app.jinja_env.from_string("{{ queue_row(r, claim_form, back) }}").render(claim_form=form, **values)
        old = app.jinja_env.from_string(QUEUE_ROW).render(claim_form=form, current_user=current_user, **values)
    assert new.strip() == old.strip()
