"""What a new user found on the bulk pages (issue 24): evidence of pasted subjects,
the bulk item's proposal page about its own subject, and a paused batch that says so
(SPEC BULK-3, BULK-6, BULK-7, REV-1, REV-2)."""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import BulkItem, Report

from .test_bulk_pages import batch_id_of, csrf_of, dry_run, sign_in, submitted


def _reported(team, reference: str, text: str, external_id: str) -> str:
    """A platform report on `reference` with evidence `text`; returns its public reference."""
    from app.services.cases.reports import intake_report

    target = {"reference": reference, "kind": "post", "evidence": {"content_text": text, "author_reference": "user:77"}}
    intake_report({"external_id": external_id, "targets": [target]}, team.integration_id)
    db.session.rollback()
    return db.session.scalar(select(Report.public_reference).where(Report.external_id == external_id))


def test_bulk_3_pasted_subjects_show_their_newest_evidence_with_its_report(app, client, team):
    """BULK-3: a sampled subject from a pasted list shows the newest evidence the
    platform sent for it, with that report's public reference."""
    _reported(team, "post:600", "old <i>text</i>", "r-old")
    newest = _reported(team, "post:600", "Buy <b>pills</b> now", "r-new")
    token = sign_in(client, team, "moderator")
    batch_id = batch_id_of(dry_run(client, token, ["post:600", "post:601"]))
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert "Evidence of the sampled items" in html
    assert "<bdi>Buy &lt;b&gt;pills&lt;/b&gt; now</bdi>" in html and "<b>pills" not in html
    assert "old &lt;i&gt;text" not in html
    assert newest in html


def _item_proposal(batch_id: str) -> str:
    db.session.rollback()
    return db.session.scalar(select(BulkItem.proposal_id).where(BulkItem.batch_id == batch_id,
                                                               BulkItem.proposal_id.is_not(None)))


def test_bulk_3_an_items_proposal_page_is_about_its_subject_and_its_batch(app, client, team):
    """BULK-3, REV-2: the item's page shows its subject's evidence and history (not the
    batch's case report, which has no target), names its batch and decides with it."""
    earlier = _reported(team, "post:700", "Spam <b>here</b>", "r-700")
    batch_id, _ = submitted(client, team, ["post:700"])
    reference = db.session.get(__import__("app.models", fromlist=["BulkBatch"]).BulkBatch, batch_id).public_reference
    sign_in(client, team, "reviewer")
    html = client.get(f"/proposals/{_item_proposal(batch_id)}").get_data(as_text=True)
    assert "Other reports on <code>post:700</code>" in html and "Other reports on ," not in html
    assert "No other report on this target or its author" not in html and earlier in html
    assert "Spam &lt;b&gt;here&lt;/b&gt;" in html
    assert f'href="/bulk/{batch_id}"' in html and reference in html
    assert "Approved or rejected with its batch" in html
    assert 'disabled aria-describedby="approval-h">Approve' not in html


def test_bulk_7_a_paused_batch_says_nothing_is_sent(app, client, team):
    """BULK-6, BULK-7: paused, the ledger shows no rate or time left but says so."""
    batch_id, digest = submitted(client, team, ["post:1", "post:2"])
    token = sign_in(client, team, "reviewer")
    assert client.post(f"/bulk/{batch_id}/approve", data={"csrf_token": token, "digest": digest}).status_code == 303
    assert client.post(f"/bulk/{batch_id}/pause", data={"csrf_token": token, "digest": digest}).status_code == 303
    live = client.get(f"/bulk/{batch_id}/live").get_data(as_text=True)
    assert "Paused — nothing is sent until resumed" in live
    assert "per second" not in live and "s left" not in live
    assert csrf_of(live)


def _finished_and_undone(app, team) -> tuple[str, str]:
    """A finished batch of three posts (made by reviewer2, approved by reviewer) and
    its undo started by an admin; returns (original id, undo id)."""
    from app.models import BulkBatch
    from app.services.bulk.actions import bulk_actions
    from app.services.bulk.batch_approval import approve_batch
    from app.services.bulk.dry_runs import start_dry_run
    from app.services.bulk.submission import submit_batch
    from app.services.bulk.undo import start_undo

    from ..builders import make_operator, run_worker

    maker = make_operator(team.installation_id, "reviewer2")
    action = bulk_actions(db.session, team.installation_id)[0]
    batch_id = start_dry_run(maker, selection={"source": "list", "text": "post:1\npost:2\npost:3"},
                             action_key=action.key, decision_code=action.decision_code, reason="spam network")
    digest = submit_batch(maker, batch_id, db.session.get(BulkBatch, batch_id).dry_run_digest)
    approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    run_worker(app)
    undo_id = start_undo(make_operator(team.installation_id, "admin"), batch_id, "a false positive")
    db.session.rollback()
    return batch_id, undo_id


def _reference(batch_id: str) -> str:
    from app.models import BulkBatch

    db.session.rollback()
    return db.session.get(BulkBatch, batch_id).public_reference


def test_bulk_8_the_undo_and_its_original_name_each_other_and_undo_is_not_offered_twice(app, client, team):
    """BULK-8: the undo links its original by B-reference, the original says "Undone
    by" its undo and offers no second undo, and its items read as on their proposal
    page (REV-4)."""
    original, undo = _finished_and_undone(app, team)
    sign_in(client, team, "moderator")
    html = client.get(f"/bulk/{undo}").get_data(as_text=True)
    assert f'<a href="/bulk/{original}">{_reference(original)}</a>' in html and "the batch it undoes" not in html
    html = client.get(f"/bulk/{original}").get_data(as_text=True)
    assert f'<a href="/bulk/{undo}">{_reference(undo)}</a>' in html and "Undone by" in html
    assert "Undo this batch" not in html
    assert html.count("being undone by") == 3  # as the proposal page says it (REV-4)
    proposal = _item_proposal(original)
    assert "being undone by" in client.get(f"/proposals/{proposal}").get_data(as_text=True)


def test_bulk_8_the_undo_refusal_says_who_may_not_approve_it(app, client, team):
    """BULK-8, FOUR-1: the original's approver reads why an undo is not theirs to approve."""
    _, undo = _finished_and_undone(app, team)
    sign_in(client, team, "reviewer")
    html = client.get(f"/bulk/{undo}").get_data(as_text=True)
    assert "You cannot approve or reject this batch." in html
    assert "started this undo, or started or approved the batch it undoes" in html
    assert "made a decision in it" not in html


def test_bulk_9_bulk_status_takes_the_public_reference_and_names_the_undo(app, team):
    """BULK-9: `flask bulk-status B-XXXX` works as the id does and prints the undo."""
    original, undo = _finished_and_undone(app, team)
    runner = app.test_cli_runner()
    by_reference = runner.invoke(args=["bulk-status", _reference(original)])
    assert by_reference.exit_code == 0, by_reference.output
    assert f"Undone by {_reference(undo)}" in by_reference.output
    by_id = runner.invoke(args=["bulk-status", original])
    assert by_id.exit_code == 0 and by_id.output == by_reference.output
    missing = runner.invoke(args=["bulk-status", "B-NOPE"])
    assert missing.exit_code == 1 and "bulk_batch_not_found" in missing.output


def test_bulk_1_the_action_choice_and_the_batch_page_read_as_words(app, client, team):
    """BULK-1, REV-3: the action select shows the decision's and the action's labels and
    the workflow's name (the value stays the key); the batch page names the decision
    by its label and an undo's selection by the batch it undoes."""
    import re

    from app.domain.labels import label_for
    from app.models import BulkBatch, WorkflowDefinition
    from app.services.bulk.actions import bulk_actions

    action = bulk_actions(db.session, team.installation_id)[0]
    name = db.session.scalar(select(WorkflowDefinition.name))
    words = f"{label_for({}, 'decision', action.decision_code)} → {label_for({}, 'action', action.action_code)} ({name})"
    sign_in(client, team, "moderator")
    html = client.get("/bulk/new").get_data(as_text=True)
    option = re.search(rf'<option (?:selected )?value="{re.escape(action.key)}\|{action.decision_code}">([^<]*)</option>', html)
    assert option and option.group(1) == words.replace("&", "&amp;"), option and option.group(1)
    assert "wfv_" not in option.group(1) and "node " not in option.group(1)
    original, undo = _finished_and_undone(app, team)
    page = client.get(f"/bulk/{original}").get_data(as_text=True)
    decision = db.session.get(BulkBatch, original).decision_code
    words = label_for({}, "decision", decision)
    assert f'<dt>Decision</dt><dd><span class="coded" title="{decision}">{words}</span>' in page
    page = client.get(f"/bulk/{undo}").get_data(as_text=True)
    assert f"<dt>Selection</dt><dd>Undo of {_reference(original)}" in page


def test_bulk_1_the_new_form_shows_the_chosen_sources_fields_and_wraps(app, client, team):
    """BULK-1: each source's fields are marked with their source so the stylesheet shows
    only the chosen one (CSS :has(); without it every section shows), and the filter's
    fields wrap inside the card instead of overflowing it."""
    import re

    sign_in(client, team, "moderator")
    html = client.get("/bulk/new").get_data(as_text=True)
    sources = re.findall(r'<input[^>]*name="source"[^>]*value="([a-z]+)"', html)
    assert set(sources) == {"list", "upload", "reports", "author"}
    assert sorted(re.findall(r'<fieldset class="source-fields" data-source="([a-z]+)"', html)) == sorted(sources)
    css = client.get("/static/console.css").get_data(as_text=True)
    for source in sources:
        assert (f'#bulk-new:has(input[name="source"][value="{source}"]:checked) '
                f'.source-fields:not([data-source="{source}"])') in css
    assert re.search(r"\.source-fields \{[^}]*flex-wrap: wrap", css)
