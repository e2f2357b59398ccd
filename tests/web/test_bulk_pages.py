"""The bulk pages (SPEC BULK-1, BULK-2, BULK-3, BULK-6): bad lines answered one by one
with nothing stored, dry-run counts, makers refused, one approval, the live ledger
that stops polling when finished, items a page at a time, and no 500 on bad input."""

from __future__ import annotations

import io
import re

from sqlalchemy import func, select

from app.extensions import db
from app.models import BulkBatch

from ..builders import login, run_worker
from .test_query_counts import queries_for

OPTION = re.compile(r'<option (?:selected )?value="([^"]+\|[^"]+)"')


def batches() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(BulkBatch))


def sign_in(client, team, name: str) -> str:
    client._cookies.clear()  # a fresh browser: the next operator signs in
    return login(client, f"{name}@{team.slug}.example.com")


def new_form(client) -> str:
    page = client.get("/bulk/new")
    assert page.status_code == 200
    return OPTION.search(page.get_data(as_text=True)).group(1)


def dry_run(client, token, lines, reason="spam network", **extra):
    action = new_form(client)
    data = {"csrf_token": token, "source": "list", "subjects": "\n".join(lines), "action": action, "reason": reason,
            **extra}
    return client.post("/bulk/new", data=data)


def batch_id_of(response) -> str:
    assert response.status_code == 303, response.get_data(as_text=True)[:2000]
    return response.headers["Location"].rsplit("/", 1)[1]


def digest_on(html: str, action: str) -> str:
    form = re.search(rf'action="/bulk/[^"]+/{action}".*?name="digest" value="([^"]+)"', html, re.S)
    assert form, f"no {action} form"
    return form.group(1)


def submitted(client, team, lines, maker="moderator") -> tuple[str, str]:
    """A batch dry-run and submitted by `maker`; returns (batch id, batch digest)."""
    token = sign_in(client, team, maker)
    batch_id = batch_id_of(dry_run(client, token, lines))
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    response = client.post(f"/bulk/{batch_id}/submit", data={"csrf_token": token, "digest": digest_on(html, "submit")})
    assert response.status_code == 303, response.get_data(as_text=True)[:2000]
    db.session.rollback()
    return batch_id, db.session.get(BulkBatch, batch_id).batch_digest


def test_bulk_1_bad_lines_are_shown_per_line_and_nothing_is_stored(app, client, team):
    token = sign_in(client, team, "moderator")
    before = batches()
    lines = ["post:1", "<script>alert(1)</script>", "post:2", "post:1"]
    response = dry_run(client, token, lines)
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    rows = re.findall(r'<tr class="refused-line">(.*?)</tr>', html, re.S)
    assert len(rows) == 2, rows
    assert 'data-label="Line">2<' in rows[0] and "bulk_reference_invalid" in rows[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rows[0] and "<script>alert" not in html
    assert 'data-label="Line">4<' in rows[1] and "bulk_subject_duplicate" in rows[1]
    assert "post:2" in html.split('name="subjects"', 1)[1].split("</textarea>", 1)[0]  # the input is kept
    assert batches() == before


def test_bulk_1_a_refusal_is_shown_beside_its_field_and_nothing_is_stored(app, client, team):
    token = sign_in(client, team, "moderator")
    before = batches()
    short = dry_run(client, token, ["post:1"], reason="x")
    assert short.status_code == 400 and "bulk_reason_invalid" in short.get_data(as_text=True)
    wrong = client.post("/bulk/new", data={"csrf_token": token, "source": "list", "subjects": "post:1",
                                           "action": "nope|nope", "reason": "spam network"})
    assert wrong.status_code == 400 and "bulk_action_invalid" in wrong.get_data(as_text=True)
    action = new_form(client)
    empty_filter = client.post("/bulk/new", data={"csrf_token": token, "source": "reports", "action": action,
                                                  "reason": "spam network"})
    assert empty_filter.status_code == 400 and "bulk_source_invalid" in empty_filter.get_data(as_text=True)
    bad_window = client.post("/bulk/new", data={"csrf_token": token, "source": "reports", "action": action,
                                                "reason": "spam network", "received_from": "yesterday"})
    assert bad_window.status_code == 400 and "bulk_filter_invalid" in bad_window.get_data(as_text=True)
    bad_file = client.post("/bulk/new", data={"csrf_token": token, "source": "upload", "action": action,
                                              "reason": "spam network", "file": (io.BytesIO(b"\xff\xfe\x00"), "a.csv")},
                           content_type="multipart/form-data")
    assert bad_file.status_code == 400 and "bulk_file_invalid" in bad_file.get_data(as_text=True)
    no_token = client.post("/bulk/new", data={"source": "list", "subjects": "post:1", "action": action,
                                              "reason": "spam network"})
    assert no_token.status_code == 400
    assert batches() == before


def test_bulk_2_dry_run_counts_and_samples_are_shown(app, client, team):
    token = sign_in(client, team, "moderator")
    batch_id = batch_id_of(dry_run(client, token, ["post:1", "post:2", "post:3"]))
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert re.search(r'data-outcome="would_act">would act <strong>3</strong>', html)
    assert re.search(r'data-outcome="invalid">invalid <strong>0</strong>', html)
    assert "Samples: would act (3 of 3)" in html
    assert "Submit 3 items for approval" in html
    assert "hx-trigger" not in html  # a dry run does not poll


def test_bulk_1_an_uploaded_csv_makes_a_dry_run(app, client, team):
    token = sign_in(client, team, "moderator")
    action = new_form(client)
    response = client.post("/bulk/new", data={
        "csrf_token": token, "source": "upload", "action": action, "reason": "spam network",
        "file": (io.BytesIO("reference,note\npost:7,a\npost:8,b\n".encode()), "subjects.csv")},
        content_type="multipart/form-data")
    batch = db.session.get(BulkBatch, batch_id_of(response))
    assert batch.counts["would_act"] == 2


def test_bulk_3_the_maker_cannot_approve_and_a_second_reviewer_does(app, client, team):
    batch_id, digest = submitted(client, team, ["post:1", "post:2"], maker="reviewer2")  # a reviewer who made it
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert 'disabled aria-describedby="decide-reason">Approve' in html
    assert "You cannot approve or reject this batch." in html and 'action="/bulk/' + batch_id + '/approve"' not in html
    token = csrf_of(html)
    refused = client.post(f"/bulk/{batch_id}/approve", data={"csrf_token": token, "digest": digest})
    assert refused.status_code == 403 and "bulk_approval_refused" in refused.get_data(as_text=True)
    db.session.rollback()
    assert db.session.get(BulkBatch, batch_id).state == "submitted"

    token = sign_in(client, team, "reviewer")
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert "Drift since the dry run" in html and "differs by <strong>0.0 %</strong>" in html
    stale = client.post(f"/bulk/{batch_id}/approve", data={"csrf_token": token, "digest": "sha256:other"})
    assert stale.status_code == 409 and "bulk_batch_digest_mismatch" in stale.get_data(as_text=True)
    approved = client.post(f"/bulk/{batch_id}/approve", data={"csrf_token": token, "digest": digest_on(html, "approve")})
    assert approved.status_code == 303 and approved.headers["Location"].endswith(f"/bulk/{batch_id}")
    db.session.rollback()
    assert db.session.get(BulkBatch, batch_id).state == "running"


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def test_bulk_6_the_ledger_polls_while_running_and_stops_when_finished(app, client, team):
    batch_id, digest = submitted(client, team, ["post:1", "post:2", "post:3"])
    token = sign_in(client, team, "reviewer")
    assert client.post(f"/bulk/{batch_id}/approve", data={"csrf_token": token, "digest": digest}).status_code == 303
    live = client.get(f"/bulk/{batch_id}/live", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert 'hx-trigger="every' in live and 'data-finished="false"' in live
    assert re.search(r'<progress id="batch-progress" max="3" value="0"', live)
    assert ">Pause</button>" in live and "Cancel the batch" in live
    # BULK-7: a control names the batch the operator saw and a cancel says why; refused before any change
    stale = client.post(f"/bulk/{batch_id}/pause", data={"csrf_token": token, "digest": "sha256:other"})
    assert stale.status_code == 409 and "bulk_batch_digest_mismatch" in stale.get_data(as_text=True)
    reasonless = client.post(f"/bulk/{batch_id}/cancel", data={"csrf_token": token, "digest": digest})
    assert reasonless.status_code == 400 and "form_invalid" in reasonless.get_data(as_text=True)
    assert f'name="digest" value="{digest}"' in live
    run_worker(app)
    live = client.get(f"/bulk/{batch_id}/live", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "hx-trigger" not in live and 'data-finished="true"' in live
    assert re.search(r'<progress id="batch-progress" max="3" value="3"', live)
    assert re.search(r'data-bucket="applied">applied <strong>3</strong>', live)
    assert live.count('class="badge state-applied"') == 3
    assert "Undo this batch" in live and ">Pause</button>" not in live
    listing = client.get("/bulk").get_data(as_text=True)
    assert "3 applied · 0 open" in listing


def test_bulk_2_the_item_list_paginates(app, client, team):
    token = sign_in(client, team, "moderator")
    batch_id = batch_id_of(dry_run(client, token, [f"post:{n}" for n in range(60)]))
    first = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert first.count('<tr class="item"') == 50
    following = re.search(r'href="([^"]+)" rel="next" id="items-next"', first).group(1).replace("&amp;", "&")
    second = client.get(following).get_data(as_text=True)
    assert second.count('<tr class="item"') == 10 and 'data-position="50"' in second and "items-next" not in second


def test_bulk_2_the_batch_page_queries_do_not_grow_with_items(app, client, team):
    token = sign_in(client, team, "moderator")
    small = batch_id_of(dry_run(client, token, [f"post:{n}" for n in range(3)]))
    large = batch_id_of(dry_run(client, token, [f"post:{n}" for n in range(100, 190)]))
    assert queries_for(app, client, f"/bulk/{small}") == queries_for(app, client, f"/bulk/{large}")
    assert queries_for(app, client, "/bulk") == queries_for(app, client, "/bulk?after=")


def test_bulk_no_500_on_bad_ids_or_bad_input(app, client, team):
    token = sign_in(client, team, "reviewer")
    for url in ("/bulk/nope", "/bulk/nope/live", "/bulk/" + "x" * 300):
        assert client.get(url).status_code == 404, url
    for step in ("submit", "approve", "reject", "pause", "resume", "cancel", "undo"):
        assert client.post(f"/bulk/nope/{step}", data={"csrf_token": token, "digest": "x", "reason": "a reason"}).status_code in (403, 404)
    assert client.get("/bulk?after=%00%ff").status_code == 400  # the console refuses NUL in any input
    assert client.get("/bulk?after=not-a-cursor").status_code == 200
    token = sign_in(client, team, "moderator")
    batch_id = batch_id_of(dry_run(client, token, ["post:1"]))
    for after in ("abc", "-5", "99999999999999999999", "1e3"):
        assert client.get(f"/bulk/{batch_id}?after={after}").status_code == 200, after
    assert client.post(f"/bulk/{batch_id}/submit", data={"csrf_token": token}).status_code == 400
    assert client.post(f"/bulk/{batch_id}/submit", data={"csrf_token": token, "digest": "x"}).status_code == 409
    assert client.get(f"/bulk/{batch_id}/submit").status_code == 303


def test_bulk_the_navigation_and_the_new_button_follow_the_role(app, client, team):
    sign_in(client, team, "moderator")
    html = client.get("/bulk").get_data(as_text=True)
    assert '<a href="/bulk"' in html and "New bulk action" in html
    sign_in(client, team, "reviewer")
    html = client.get("/bulk").get_data(as_text=True)
    assert '<a href="/bulk"' in html and "New bulk action" not in html
    assert client.get("/bulk/new").status_code == 403


def test_bulk_3_samples_selected_through_reports_show_their_evidence_escaped(app, client, team):
    """BULK-3, FOUR-10: the reviewer sees the evidence of sampled items, platform text
    escaped and isolated in <bdi>."""
    from app.services.cases.reports import intake_report

    for n in range(3):
        target = {"reference": f"post:50{n}", "kind": "post",
                  "evidence": {"content_text": f"Buy <b>pills</b> {n}", "author_reference": "user:77"}}
        intake_report({"external_id": f"spam-{n}", "targets": [target]}, team.integration_id)
    token = sign_in(client, team, "moderator")
    response = client.post("/bulk/new", data={"csrf_token": token, "source": "reports", "action": new_form(client),
                                              "author_reference": "user:77", "reason": "spam network"})
    batch_id = batch_id_of(response)
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert "Evidence of the sampled items" in html
    assert "<bdi>Buy &lt;b&gt;pills&lt;/b&gt; 2</bdi>" in html and "<b>pills" not in html
    assert re.search(r'data-outcome="would_act">would act <strong>3</strong>', html)


def test_bulk_3_the_submitted_page_queries_do_not_grow_with_items(app, client, team):
    """BULK-3, BULK-4: the reviewer's page (samples, drift resolved again, items) runs
    the same number of queries for 3 and for 90 items."""
    small, _ = submitted(client, team, [f"post:{n}" for n in range(3)])
    large, _ = submitted(client, team, [f"post:{n}" for n in range(100, 190)])
    sign_in(client, team, "reviewer")
    assert queries_for(app, client, f"/bulk/{small}") == queries_for(app, client, f"/bulk/{large}")
    assert queries_for(app, client, f"/bulk/{small}/live") == queries_for(app, client, f"/bulk/{large}/live")


def test_bulk_4_the_reviewers_drift_is_read_only(app, client, team):
    """BULK-4: the drift shown on a submitted batch is resolved again without a write."""
    from .test_query_counts import counting

    batch_id, _ = submitted(client, team, ["post:1", "post:2"])
    sign_in(client, team, "reviewer")
    db.session.remove()
    with counting(app) as statements:
        html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert "Drift since the dry run" in html
    writes = [s for s in statements if s.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert writes == []
