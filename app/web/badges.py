"""The list rows and their small pieces as Python (issue 25 speed): a Jinja macro call
or a row template included per row costs more than the tags it writes, and pages write
them hundreds of times. Each function gives the very markup its macro or row template
gave (the macro's name is bound to it in templates/_macros/, and the row templates call
the row functions), every value escaped (`escape`, in C; Markup.format would parse its
format string in Python at every call). tests/web/test_badges.py, test_queue_pieces.py,
test_proposal_rows.py, test_task_row.py and test_proposal_list_row.py hold them to the
former templates' output."""

from __future__ import annotations

from typing import Any

from flask import current_app, url_for
from flask_login import current_user
from jinja2.filters import do_truncate
from markupsafe import Markup, escape

from app.domain.failures import failure_words
from app.domain.states import is_terminal

from .formatting import erased_note, time_tag
from .labels import label
from .templating import row_url

DASH = Markup("—")


def coded(kind: str, code: str | None) -> Markup:
    """A code as its label in words, the code in the tooltip (REV-3)."""
    return Markup(f'<span class="coded" title="{escape(code)}">{escape(label(kind, code))}</span>')


def state_badge(state: str, terminal: bool | None = None, kind: str = "proposal_state") -> Markup:
    """A state as a badge; a failed delivery says whether it is final or will retry."""
    suffix = ""
    if state == "failed" and terminal is not None:
        suffix = " (final)" if terminal else " (will retry)"
    state_ = escape(state)
    return Markup(f'<span class="badge state-{state_}" title="state: {state_}">{escape(label(kind, state))}{suffix}</span>')


def short_id(value: Any) -> Markup:
    """A long id, whole in the page (copy and hover give it all); CSS shortens it."""
    value_ = escape(value)
    return Markup(f'<code class="id" title="{value_}">{value_}</code>')


def delivery_summary(p: Any) -> str:
    """How far a proposal's delivery got, in words ("2 attempts (1 operator retry)")."""
    count = p.delivery_attempt_count
    if count == 0:
        return "nothing sent" if is_terminal(p.state, p.delivery_terminal) else "not sent yet"
    words = f"{count} attempt{'s' if count != 1 else ''}"
    if p.delivery_cycle > 1:
        words += f" ({p.delivery_cycle - 1} operator retr{'ies' if p.delivery_cycle > 2 else 'y'})"
    return words


def error_words(code: str | None, status: int | None = None, excerpt: str | None = None,
                tooltip: bool = False) -> Markup:
    """A failure in words first, its code in small print (QUEUE-6), or only as the
    words' tooltip (`tooltip`, where a page leads with it); with an attempt's HTTP
    status and the start of the platform's answer (escaped) when given."""
    if not code:
        return DASH
    title = f' title="{escape(code)}"' if tooltip else ""
    html = f'<span class="error-words"{title}>{escape(failure_words(code))}</span>'
    if status:
        said = f': <q class="excerpt">{escape(excerpt)}</q>' if excerpt else ""
        html += f' <span class="platform-status">The platform answered HTTP {escape(status)}{said}</span>'
    return Markup(html if tooltip else f'{html} <small class="code">{escape(code)}</small>')


def subject(p: Any, names: dict | None) -> Markup:
    """An action's subject named by what it is (QUEUE-6): the account with its name,
    not the post it was found through; `names` from subject_names(proposals)."""
    s = names.get(p.id) if names else None
    mark = f" {protected_badge(s.mark)}" if s and getattr(s, "mark", None) else ""  # POL-4
    if s and s.account and s.via == s.reference:
        return Markup(f'<span class="subject">the author of <code>{escape(s.via)}</code>{mark}</span>')
    if s and s.account:
        named = f"<strong>{escape(s.name)}</strong> (<code>{escape(s.reference)}</code>)" if s.name else (
            f"<code>{escape(s.reference)}</code>")
        return Markup(f'<span class="subject">the account {named}{mark}</span>')
    return Markup(f"<code>{escape(p.target.get('reference', ''))}</code>{mark}")


def protected_badge(mark: Any) -> Markup:
    """The protected-subject mark (POL-4): a small "Protected" badge with the reason in
    its tooltip; nothing for None."""
    if not mark:
        return Markup("")
    return Markup(f'<span class="badge protected" data-protected="{escape(mark.kind)}" '
                  f'title="{escape(mark.title)}">Protected</span>')


# -- the queue row's pieces (templates/_macros/queue.html; QUEUE-1, QUEUE-2, QUEUE-4) --


def subject_name(r: Any) -> Markup:
    """A queue subject named by what it is: its kind, reference and author (the
    author's name is platform text, isolated in <bdi>: FOUR-10), each with its
    protected mark (``mark``, ``author_mark``: POL-4) when the row has one."""
    html = f'<span class="subject"><strong>{escape(label("subject_kind", r.kind))}</strong> <code class="ref">{escape(r.reference)}</code>'
    mark, author_mark = getattr(r, "mark", None), getattr(r, "author_mark", None)  # POL-4
    if mark:
        html += f" {protected_badge(mark)}"
    if r.author_name or r.author_reference:
        name = f"<bdi>{escape(r.author_name)}</bdi>" if r.author_name else ""
        other = r.author_reference and r.author_reference != r.reference
        small = f" <small>({escape(r.author_reference)})</small>" if other else ""
        badge = f" {protected_badge(author_mark)}" if author_mark and author_mark is not mark else ""
        html += f'<span class="author"> · {name}{small}{badge}</span>'
    return Markup(html + "</span>")


def words_of(kind: str, codes: Any) -> Markup:
    """Codes as their labels, comma-separated; a dash for none."""
    return Markup(", ".join([escape(label(kind, code)) for code in codes]) or "—")


def age(seconds: int) -> Markup:
    """A wait in minutes, hours and minutes up to two days, else whole days."""
    minutes = seconds // 60
    if minutes < 60:
        return Markup(f"{minutes} min")
    if minutes < 2880:
        return Markup(f"{minutes // 60} h {minutes % 60} min")
    return Markup(f"{minutes // 1440} days")


def due(r: Any) -> Markup:
    """When an open subject becomes overdue, or since when it is (QUEUE-4)."""
    if r.overdue:
        return Markup(f'<strong class="overdue">overdue</strong> since {time_tag(r.due_at)}')
    return Markup(f"due {time_tag(r.due_at)}") if r.due_at else Markup("")


def claim_words(r: Any) -> Markup:
    """Who holds a subject's claim and until when (QUEUE-2)."""
    if not r.claimed_by:
        return Markup("Unclaimed")
    holder = "you" if r.claimed_by_me else escape(r.claimed_by)
    return Markup(f"Claimed by {holder} until {time_tag(r.claimed_until)}")


# -- the proposal page's attempt and audit rows (templates/proposals/_live.html) --

PURPOSE_LABELS = {"update": "update", "read-back": "read-back", "recheck": "read-back before resend"}
PURPOSE_TITLES = {
    "update": "The request that makes the change.",
    "read-back": "Reads the platform to confirm the change (PLAT-2).",
    "recheck": "A later attempt reads the platform first and sends the update only if the change is not there yet.",
}
ABANDONED = ('<strong title="The worker stopped before recording an answer; a later claim took over.">'
             "abandoned</strong>")


def attempt_row(a: Any, status: str | None) -> Markup:
    """One attempt as a table row (DLV-4, QUEUE-6): purpose, request, when and how
    long, the outcome in words with the platform's status, the digests' starts.
    `status` is its `attempt_statuses` entry ("abandoned" is said)."""
    if a.finished_at:
        took = f"{escape(a.duration_ms)} ms" if a.duration_ms is not None else "finished"
    else:
        took = ABANDONED if status == "abandoned" else "in flight"
    if a.error_code:
        outcome = str(error_words(a.error_code, a.response_status, a.response_excerpt))
        if a.detail:
            outcome += f' <small class="detail">{escape(a.detail)}</small>'
    else:
        outcome = f"HTTP {escape(a.response_status)}" if a.response_status else "—"
    if a.response_class:
        outcome += f' <small class="code" title="response class">{escape(a.response_class)}</small>'
    url = escape(a.url)
    response = a.response_digest or ""
    return Markup(
        f'<tr><td data-label="#">{escape(a.attempt_number)}</td>\n'
        f'        <td data-label="Request" class="request"><span title="{escape(PURPOSE_TITLES.get(a.purpose, ""))}">'
        f'{escape(PURPOSE_LABELS.get(a.purpose, a.purpose))}</span>: {escape(a.method)} '
        f'<code class="url" title="{url}">{url}</code></td>\n'
        f'        <td data-label="When">{time_tag(a.started_at)}<br><small>{took}</small></td>\n'
        f'        <td data-label="Outcome" class="outcome">{outcome}</td>\n'
        f'        <td data-label="Digests" class="digests"><code title="request {escape(a.request_digest)}">'
        f'{escape(a.request_digest[7:19])}</code><br><code title="response {escape(response)}">'
        f'{escape((response or "—")[7:19])}</code></td></tr>'
    )


def audit_row(e: Any, actors: dict) -> Markup:
    """One audit event of a proposal's timeline: sequence, time, action, who (an
    operator by name from `actors`, else the actor type) and its details' JSON."""
    who = actors.get(e.actor_id, e.actor_type) if e.actor_type == "operator" else e.actor_type
    return Markup(
        f'<li><span class="seq">#{escape(e.seq)}</span> {time_tag(e.created_at)} <strong>{escape(e.action)}</strong>\n'
        f"      by {escape(who)}\n"
        f"      <details><summary>details</summary><pre><code>{escape(e.details_json)}</code></pre></details></li>"
    )


# -- a proposal's state, undone or not, and the proposals list's row (REV-4) --


def undo_link(undo: Any) -> Markup:
    """What undoes an action (an `UndoMark`): its compensation, or the appeal correction
    and the proposal it made."""
    if undo.via == "compensation":
        return Markup(f'<a href="{escape(url_for("console.proposal", proposal_id=undo.proposal_id))}">'
                      f'compensation: {escape(label("action", undo.action_code))}</a>')
    html = f'<a href="{escape(url_for("console.appeal", appeal_id=undo.appeal_id))}">appeal correction</a>'
    if undo.proposal_id:
        html += (f' (<a href="{escape(url_for("console.proposal", proposal_id=undo.proposal_id))}">'
                 f'{escape(label("action", undo.action_code))}</a>)')
    return Markup(html)


def proposal_state(p: Any, undo: Any = None) -> Markup:
    """A proposal's state badge, or "Undone" with what undid it, or the badge with
    what is undoing it (REV-4). `p`: a proposal, or a mapping with ``state`` and
    ``delivery_terminal``; `undo`: its `UndoMark` or None."""
    state, terminal = (p["state"], p["delivery_terminal"]) if isinstance(p, dict) else (p.state, p.delivery_terminal)
    if undo and undo.done:
        return Markup(f'<span class="badge state-undone" title="state: {escape(state)}">Undone</span>\n'
                      f'<span class="undo">by {undo_link(undo)}</span>')
    badge = state_badge(state, terminal)
    return Markup(f'{badge} <span class="undo">· being undone by {undo_link(undo)}</span>') if undo else badge


EMERGENCY_BADGE = Markup(' <span class="badge emergency" title="Approved alone in an emergency; reviewed afterwards '
                         '(POL-6)">Emergency</span>')


def emergency_badge(p: Any) -> Markup:
    """"Emergency" after an action one person approved alone (POL-6); nothing otherwise.
    `p`: a proposal, or a mapping with ``emergency``."""
    flagged = p.get("emergency") if isinstance(p, dict) else getattr(p, "emergency", False)
    return EMERGENCY_BADGE if flagged else Markup("")


def emergency_refusal(code: str) -> str:
    """Why the viewer cannot review an emergency action, in words (POL-6)."""
    from app.domain.emergency_action import REFUSALS

    return REFUSALS.get(code, code)


def proposal_row(row: dict, names: dict | None, undo: dict) -> Markup:
    """One proposal as a row of the proposals list: created, action, subject, report,
    state (undone or not), how far delivery got and the last error in words.
    `row`: ``proposal`` and ``report_reference``; `undo`: `undo_marks` by proposal id."""
    p = row["proposal"]
    return Markup(
        f'<tr>\n  <td data-label="Created">{time_tag(p.created_at)}</td>\n'
        f'  <td data-label="Action"><a href="{escape(row_url("console.proposal", "proposal_id", p.id))}" '
        f'title="{escape(p.action_code)}">{escape(label("action", p.action_code))}</a>{emergency_badge(p)}</td>\n'
        f'  <td data-label="Target">{subject(p, names)}</td>\n'
        f'  <td data-label="Report"><a href="{escape(row_url("console.report", "report_id", p.report_id))}">'
        f"{escape(row['report_reference'])}</a></td>\n"
        f'  <td data-label="State">{proposal_state(p, undo.get(p.id))}</td>\n'
        f'  <td data-label="Delivery">{escape(delivery_summary(p))}</td>\n'
        f'  <td data-label="Last error">{error_words(p.last_error_code)}</td>\n</tr>'
    )


# -- the approval tasks page's row (templates/tasks/_row.html; FOUR-1, FOUR-5) --

NO_MAKER = "someone no longer listed"


def maker_line(m: Any, short: bool = False) -> Markup:
    """Whose decision or proposal this enforces and why (FOUR-5, `approving.MakerLine`):
    their name and words in <bdi> (platform text); `short` shortens the words."""
    quote = m.short_quote() if short else m.quote
    html = f"{escape(m.label)} — {escape(m.verb)} <bdi>{escape(m.name or NO_MAKER)}</bdi>"
    if quote:
        html += f" — “<bdi>{escape(quote)}</bdi>”"
    if m.note:
        html += f" — {escape(m.note)}"
    return Markup(html)


def task_row(row: dict, names: dict | None, reviews: dict, approving: dict, form: Any) -> Markup:
    """One approval task as a row of the tasks page: due time, the action and whose
    decision it enforces, where it sends, the subject, the evidence, its state and the
    claim or release form, or why it is not the operator's to decide (FOUR-1).

    Args:
        row: a `task_list` row (``task``, ``proposal``, ``assignee``, ``claim``, ``release``).
        names: `subject_names` of the page's proposals; reviews: `task_reviews`;
        approving: `approving` of the page's proposals; form: the page's form (its CSRF field).
    """
    t, p, claim = row["task"], row["proposal"], row["claim"]
    not_yours = ' class="not-yours"' if claim.shown and not claim.allowed else ""
    html = [f'<tr data-task="{escape(t.id)}"{not_yours}>\n  <td data-label="Due">{time_tag(t.due_at)}</td>\n'
            '  <td data-label="Action">']
    if p:
        html.append(f'<a href="{escape(row_url("console.proposal", "proposal_id", p.id))}" title="{escape(p.action_code)}">'
                    f'{escape(label("action", p.action_code))}</a>{emergency_badge(p)}\n    ')
        a = approving.get(p.id)
        if a and a.maker:
            html.append(f'<br><small class="maker">{maker_line(a.maker, short=True)}</small>')
        html.append("\n    ")
        if a and a.host:
            html.append(f'<br><small class="destination">Sends to <strong class="destination-host">{escape(a.host)}</strong></small>')
    html.append(f'</td>\n  <td data-label="Target">{subject(p, names) if p else ""}</td>\n  <td data-label="What was reported">')
    rv = reviews.get(p.id) if p else None
    if rv and rv.evidence and getattr(rv.evidence[0], "erased_at", None):  # OPS-4: the text is gone; say when and why
        html.append(str(erased_note(rv.evidence[0])))
    elif rv and rv.evidence:
        e = rv.evidence[0]
        excerpt = do_truncate(current_app.jinja_env, e.content_text or "", 140)
        by = e.author_name or e.author_reference or "an unknown author"
        others = ""
        if rv.other_reports:
            plural = "s" if rv.other_reports != 1 else ""
            others = f" · {escape(rv.other_reports)} other report{plural} about content by this author"
        html.append(f'\n    <span class="excerpt">“<bdi>{escape(excerpt)}</bdi>”</span>\n'
                    f"    <small>by <bdi>{escape(by)}</bdi>{others}</small>\n    ")
    else:
        html.append('<span class="empty">no evidence sent</span>')
    html.append(f'</td>\n  <td data-label="State">{coded("task_state", t.state)}</td>\n'
                f'  <td data-label="Claimed by">{escape(row["assignee"] or "—")}</td>\n  <td data-label="Claim">')
    if claim.allowed:
        html.append(_task_form("console.claim", t.id, form, "Claim"))
    elif claim.shown:
        html.append('\n    <p class="not-yours-note" data-not-yours="true"><strong>Not yours to decide.</strong> '
                    f"{escape(claim.reason)}</p>\n    ")
    elif row["release"].allowed:
        html.append(_task_form("console.release", t.id, form, "Release"))
    else:
        html.append("—")
    html.append("</td>\n</tr>")
    return Markup("".join(html))


def _task_form(endpoint: str, task_id: str, form: Any, button: str) -> str:
    url = escape(row_url(endpoint, "task_id", task_id))
    return (f'\n    <form method="post" action="{url}" hx-post="{url}" hx-target="closest tr" hx-swap="outerHTML">'
            f'{escape(form.csrf_token)}<button type="submit">{button}</button></form>\n    ')


def claim_control(r: Any, claim_form: Any, back: str, hx_target: str | None = None) -> Markup:
    """Claim or release an open subject (QUEUE-2), for a moderator: a plain POST that
    returns to `back`, or with htmx the element `hx_target` swapped in place."""
    if not (current_user.has_role("moderator") and r.state == "open"):
        return Markup("")
    url = escape(row_url("console.queue_release" if r.claimed_by_me else "console.queue_claim", "subject_id", r.id))
    htmx = f' hx-post="{url}" hx-target="{escape(hx_target)}" hx-swap="outerHTML"' if hx_target else ""
    if r.claimed_by_me:
        button = '<button type="submit" data-key="claim">Release</button>\n  '
    else:
        button = "" if r.claimed_by else '<button type="submit" data-key="claim">Claim</button>'
    return Markup(f'\n\n<form class="inline" method="post" action="{url}"{htmx}>\n'
                  f'  {escape(claim_form.csrf_token)}<input type="hidden" name="next" value="{escape(back)}">\n'
                  f"  {button}\n</form>\n")


def queue_row(r: Any, claim_form: Any, back: str) -> Markup:
    """One reported subject as a row of the queue (QUEUE-1, QUEUE-2, QUEUE-4): what it
    is, its open reports, reasons, when reported, how long it waited and the claim;
    a decided subject waits for nothing and cannot be claimed."""
    url = escape(row_url("console.queue_subject", "subject_id", r.id))
    preview = f"<br><small>{erased_note(r)}</small>\n    " if getattr(r, "erased_at", None) else ""  # OPS-4
    if r.preview:
        preview += f'<br><small class="preview"><bdi>{escape(do_truncate(current_app.jinja_env, r.preview, 140))}</bdi></small>'
    count = f"{escape(r.open_count)}"
    if r.report_count != r.open_count:
        count += f" <small>of {escape(r.report_count)}</small>"
    reasons = str(words_of("report_reason", r.reasons))
    if r.categories:
        reasons += f"<br><small>{words_of('report_category', r.categories)}</small>"
    queue = f" <small>in {escape(r.queue_name)}</small>" if r.queue_name else ""
    if r.state == "open":
        hx_target = f"#row-{r.id}"
        waiting = (f'\n  \n  <td data-label="Waiting">{age(r.age_seconds)}{queue}<br>{due(r)}</td>\n'
                   f'  <td data-label="Claim">{claim_words(r)} {claim_control(r, claim_form, back, hx_target)}</td>\n  ')
    else:
        waiting = (f'\n  \n  <td data-label="Waiting"><strong>Decided</strong>{queue}<br><small>last report '
                   f"{time_tag(r.last_reported_at)}</small></td>\n"
                   '  <td data-label="Claim"><span class="empty">—</span></td>\n  ')
    overdue = ' class="overdue"' if r.overdue else ""
    return Markup(
        f'<tr id="row-{escape(r.id)}"{overdue}>\n'
        f'  <td data-label="Subject"><a href="{url}">{subject_name(r)}</a>\n    {preview}</td>\n'
        f'  <td data-label="Open reports">{count}</td>\n'
        f'  <td data-label="Reasons">{reasons}</td>\n'
        f'  <td data-label="Reported">first {time_tag(r.first_reported_at)}<br>latest {time_tag(r.last_reported_at)}</td>'
        f"{waiting}\n</tr>"
    )


def register_badges(app) -> None:
    """Bind each function for templates/_macros/ui.html and queue.html, which name them for their importers."""
    app.jinja_env.globals.update(
        {f"{name}_tag": fn for name, fn in
         (("coded", coded), ("state_badge", state_badge), ("short_id", short_id),
          ("delivery_summary", delivery_summary), ("error_words", error_words), ("subject", subject),
          ("subject_name", subject_name), ("words_of", words_of), ("age", age), ("due", due),
          ("claim_words", claim_words))}
    )
    app.jinja_env.globals.update(protected_badge=protected_badge)
    app.jinja_env.globals.update(attempt_row=attempt_row, audit_row=audit_row, task_row=task_row,
                                 maker_line_tag=maker_line, proposal_state_tag=proposal_state,
                                 undo_link_tag=undo_link, proposal_row=proposal_row,
                                 claim_control_tag=claim_control, queue_row=queue_row,
                                 emergency_badge=emergency_badge, emergency_refusal=emergency_refusal)
