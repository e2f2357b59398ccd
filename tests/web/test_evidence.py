"""The platform's evidence at report intake and on the review pages (REV-1)."""

from __future__ import annotations

import hashlib
import re

import pytest
import sqlalchemy
from sqlalchemy import func, select, text

from app.extensions import db
from app.models import AuditEvent, Report, ReportEvidence, ReportTarget

from ..builders import approve, decide, decide_report, login, run_worker

EVIDENCE = {
    "content_text": "You are <script>alert('pwned')</script> & everyone knows it",
    "author_reference": "user:9001",
    "author_name": "loud_<b>neighbour</b>",
    "media": [
        {"url": 'https://cdn.example/m/1.jpg?x="><img/src=x>', "sha256": "b" * 64, "mime_type": "image/jpeg"},
    ],
    "permalink": "https://example.social/p/77",
    "posted_at": "2026-11-30T08:15:00Z",
}
CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'self'"
)


def post(client, world, value):
    return client.post("/api/v1/reports", json=value, headers={"Authorization": f"Bearer {world.console_token}"})


def counts():
    db.session.rollback()
    return tuple(
        db.session.scalar(select(func.count()).select_from(m))
        for m in (Report, ReportTarget, ReportEvidence, AuditEvent)
    )


def intake(external_id="ev-1", evidence=None, reference="post:77"):
    return {"external_id": external_id, "targets": [{"reference": reference, "kind": "post", "evidence": evidence}]}


def test_intake_stores_evidence_once_with_its_digest(app, client, world):
    """REV-1: every field stored once, with a digest the answer names; audit keeps the digest, not the text."""
    response = post(client, world, intake(evidence=EVIDENCE))
    assert response.status_code == 201
    body = response.get_json()
    row = db.session.scalar(select(ReportEvidence).where(ReportEvidence.report_id == body["report_id"]))
    assert body["evidence_digests"] == [row.evidence_digest] and body["evidence_mismatch"] is False
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", row.evidence_digest)
    assert (row.content_text, row.author_reference, row.author_name) == (
        EVIDENCE["content_text"],
        "user:9001",
        EVIDENCE["author_name"],
    )
    assert row.media == EVIDENCE["media"] and row.permalink == EVIDENCE["permalink"]
    assert row.posted_at.isoformat() == "2026-11-30T08:15:00+00:00"
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "report.received"))
    assert audit.details["targets"] == [
        {"reference": "post:77", "kind": "post", "evidence_digest": row.evidence_digest}
    ]
    assert "content_text" not in audit.details_json


def test_resent_report_keeps_the_first_evidence_and_says_so(app, client, world):
    """REV-1: evidence is never changed; a repeat with other evidence is answered 200 with
    evidence_mismatch and a notice, and changes no row."""
    first = post(client, world, intake(evidence=EVIDENCE)).get_json()
    before = counts()
    same = post(client, world, intake(evidence=EVIDENCE))
    assert same.status_code == 200 and same.get_json()["evidence_mismatch"] is False
    other = post(client, world, intake(evidence={**EVIDENCE, "content_text": "edited after the report"}))
    assert other.status_code == 200
    answer = other.get_json()
    assert answer["evidence_mismatch"] is True and "first received" in answer["notice"]
    assert answer["evidence_digests"] == first["evidence_digests"]
    assert counts() == before
    stored = select(ReportEvidence.content_text).where(ReportEvidence.report_id == first["report_id"])
    assert db.session.scalar(stored) == EVIDENCE["content_text"]


@pytest.mark.parametrize(
    "evidence, field",
    [
        ({"content_text": "x" * 10_001}, "targets[0].evidence.content_text"),
        ({"media": [EVIDENCE["media"][0]] * 11}, "targets[0].evidence.media"),
        ({"media": [{**EVIDENCE["media"][0], "url": "javascript:alert(1)"}]}, "targets[0].evidence.media[0].url"),
        ({"media": [{**EVIDENCE["media"][0], "sha256": "nothex"}]}, "targets[0].evidence.media[0].sha256"),
        ({"posted_at": "2026-11-30 08:15"}, "targets[0].evidence.posted_at"),
        ({"permalink": "data:text/html,hi"}, "targets[0].evidence.permalink"),
        ({"author_reference": "x" * 501}, "targets[0].evidence.author_reference"),
        ({"unknown": 1}, "targets[0].evidence.unknown"),
        ("just text", "targets[0].evidence"),
        (None, "targets[0].evidence"),  # found by schemathesis: leave it out instead
    ],
)
def test_evidence_beyond_the_limits_is_a_clear_400(app, client, world, evidence, field):
    """REV-1: a clear 400 report_evidence_invalid naming the field; no row changed."""
    before = counts()
    response = post(client, world, intake(evidence=evidence))
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert (error["code"], error["field"]) == ("report_evidence_invalid", field)
    assert counts() == before


def test_the_database_refuses_to_change_evidence(app, world):
    """REV-1: stored evidence is immutable: the database refuses UPDATE (trigger, both backends)."""
    report_id = world.report_ids[0]
    db.session.rollback()
    with pytest.raises(sqlalchemy.exc.DBAPIError):
        db.session.execute(
            text("UPDATE report_evidence SET content_text = 'rewritten' WHERE report_id = :r"), {"r": report_id}
        )
        db.session.flush()
    db.session.rollback()
    assert db.session.scalar(
        select(ReportEvidence.content_text).where(ReportEvidence.report_id == report_id)
    ).startswith("Nobody wants you here")


def escaped_everywhere(html: str) -> None:
    assert "<script>alert('pwned')</script>" not in html and "&lt;script&gt;alert(" in html
    assert "loud_&lt;b&gt;neighbour&lt;/b&gt;" in html
    assert "<img" not in html  # media are links, never loaded by the page
    assert 'href="https://cdn.example/m/1.jpg?x=&#34;&gt;&lt;img/src=x&gt;"' in html
    assert "sha256" in html.lower() and "b" * 64 in html
    assert 'href="https://example.social/p/77"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_evidence_is_shown_escaped_on_every_review_page(app, client, world, platform):
    """REV-1: the report, proposal, approval task and appeal pages show the evidence, escaped;
    media as links with their hash; the CSP is unchanged."""
    report_id = post(client, world, intake(evidence=EVIDENCE)).get_json()["report_id"]
    proposal = decide(world, report_id)
    login(client, "reviewer@example.com")
    pages = [f"/reports/{report_id}", f"/proposals/{proposal.id}"]
    for url in pages:
        response = client.get(url)
        assert response.headers["Content-Security-Policy"] == CSP
        escaped_everywhere(response.get_data(as_text=True))
    tasks = client.get("/tasks").get_data(as_text=True)
    assert "&lt;script&gt;alert(" in tasks and "<script>alert(" not in tasks
    assert "loud_&lt;b&gt;neighbour&lt;/b&gt;" in tasks

    approve(world, proposal)
    run_worker(app)
    appeal = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "ev-1", "statement": "satire"},
    ).get_json()
    response = client.get(f"/appeals/{appeal['appeal_id']}")
    assert response.status_code == 200 and response.headers["Content-Security-Policy"] == CSP
    escaped_everywhere(response.get_data(as_text=True))


def test_demo_reports_carry_the_platforms_evidence(app, client, world, platform):
    """REV-1: the demo's reports show the post's text and author from the demo platform's content store."""
    import requests

    posts = requests.get(f"{platform.url}/content", timeout=5).json()["posts"]
    login(client, "reviewer@example.com")
    proposal = decide_report(world)
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    post_1001 = posts["post:1001"]
    assert post_1001["text"].replace("'", "&#39;") in page
    assert post_1001["author_name"] in page and post_1001["author_reference"] in page
    media = db.session.scalar(select(ReportEvidence).where(ReportEvidence.target_reference == "post:1001")).media[0]
    served = requests.get(media["url"], timeout=5)  # the link works when a person follows it
    assert served.status_code == 200 and hashlib.sha256(served.content).hexdigest() == media["sha256"]
