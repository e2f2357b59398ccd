"""The row pieces of templates/_macros/ui.html as Python (issue 25 speed): through the
templates they write what the macros wrote (the expected text below was rendered by
the macros before they became Python), every value escaped."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

EVIL = '<b>"x"&\'y\'</b>'
CASES = [
    ("coded('task_state', 'open')", {}),
    ("coded('task_state', v)", {"v": EVIL}),
    ("coded('task_state', none)", {}),
    ("state_badge('failed', false)", {}),
    ("state_badge('failed', true)", {}),
    ("state_badge('failed')", {}),
    ("state_badge('open', kind='report_state')", {}),
    ("state_badge(v)", {"v": EVIL}),
    ("short_id(v)", {"v": EVIL}),
    ("delivery_summary(p)", {"p": NS(delivery_attempt_count=0, state="failed", delivery_terminal=True, delivery_cycle=1)}),
    ("delivery_summary(p)", {"p": NS(delivery_attempt_count=0, state="queued", delivery_terminal=False, delivery_cycle=1)}),
    ("delivery_summary(p)", {"p": NS(delivery_attempt_count=1, state="applied", delivery_terminal=False, delivery_cycle=1)}),
    ("delivery_summary(p)", {"p": NS(delivery_attempt_count=5, state="failed", delivery_terminal=False, delivery_cycle=2)}),
    ("delivery_summary(p)", {"p": NS(delivery_attempt_count=9, state="failed", delivery_terminal=True, delivery_cycle=3)}),
    ("error_words(none)", {}),
    ("error_words('connection_failed')", {}),
    ("error_words('platform_client_error', 422, v)", {"v": EVIL}),
    ("error_words('platform_server_error', 503)", {}),
    ("error_words(v)", {"v": EVIL}),
    ("error_words(v, 500, v, tooltip=True)", {"v": EVIL}),
    ("subject(p, none)", {"p": NS(id="p1", target={"reference": EVIL})}),
    ("subject(p, {})", {"p": NS(id="p1", target={})}),
    ("subject(p, names)", {"p": NS(id="p1", target={}),
                           "names": {"p1": NS(account=True, via="user:1", reference="user:1", name=None)}}),
    ("subject(p, names)", {"p": NS(id="p1", target={}),
                           "names": {"p1": NS(account=True, via="post:1", reference=EVIL, name=EVIL)}}),
    ("subject(p, names)", {"p": NS(id="p1", target={}),
                           "names": {"p1": NS(account=True, via="post:1", reference="user:2", name="")}}),
    ("subject(p, names)", {"p": NS(id="p1", target={"reference": "post:9"}),
                           "names": {"p1": NS(account=False, via=None, reference="post:9", name=None)}}),
]
EXPECTED = [
    '<span class="coded" title="open">Open</span>',
    '<span class="coded" title="&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</span>',
    '<span class="coded" title="None">—</span>',
    '<span class="badge state-failed" title="state: failed">Delivery failed (will retry)</span>',
    '<span class="badge state-failed" title="state: failed">Delivery failed (final)</span>',
    '<span class="badge state-failed" title="state: failed">Delivery failed</span>',
    '<span class="badge state-open" title="state: open">Open</span>',
    '<span class="badge state-&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;" title="state: &lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</span>',
    '<code class="id" title="&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</code>',
    'nothing sent',
    'not sent yet',
    '1 attempt',
    '5 attempts (1 operator retry)',
    '9 attempts (2 operator retries)',
    '—',
    '<span class="error-words">The console could not reach the platform (the connection failed or was cut).</span> <small class="code">connection_failed</small>',
    '<span class="error-words">The platform refused the request as wrong (a 4xx answer); sending it again would not help.</span> <span class="platform-status">The platform answered HTTP 422: <q class="excerpt">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</q></span> <small class="code">platform_client_error</small>',
    '<span class="error-words">The platform had an error of its own (a 5xx answer); the console tries again.</span> <span class="platform-status">The platform answered HTTP 503</span> <small class="code">platform_server_error</small>',
    '<span class="error-words">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;.</span> <small class="code">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</small>',
    '<span class="error-words" title="&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;.</span> <span class="platform-status">The platform answered HTTP 500: <q class="excerpt">&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</q></span>',
    '<code>&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</code>',
    '<code></code>',
    '<span class="subject">the author of <code>user:1</code></span>',
    '<span class="subject">the account <strong>&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</strong> (<code>&lt;b&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/b&gt;</code>)</span>',
    '<span class="subject">the account <code>user:2</code></span>',
    '<code>post:9</code>',
]


def render(app, call: str, values: dict) -> str:
    source = ('{% from "_macros/ui.html" import coded, state_badge, short_id, delivery_summary, error_words, subject %}'
              "{{ " + call + " }}")
    with app.test_request_context("/"):
        return app.jinja_env.from_string(source).render(**values)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_a_row_piece_writes_what_its_macro_wrote(app, index):
    call, values = CASES[index]
    assert render(app, call, values) == EXPECTED[index]
