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
