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
