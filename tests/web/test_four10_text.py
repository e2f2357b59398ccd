"""What a reviewer sees is what it is (SPEC FOUR-10): references with characters that
change what is shown are refused at intake; platform text is isolated in `<bdi>`;
external links show their real host and never carry userinfo."""

from __future__ import annotations

import re

import pytest

from ..builders import decide, login
from .test_evidence import EVIDENCE, counts, intake, post


@pytest.mark.parametrize(
    ("reference", "position", "what"),
    [
        ("post:77\u200b", 7, "U+200B ZERO WIDTH SPACE (invisible)"),
        ("post:\u202e77", 5, "U+202E RIGHT-TO-LEFT OVERRIDE (bidi)"),
        ("p\u043est:77", 1, "U+043E CYRILLIC SMALL LETTER O (lookalike)"),
        ("post:7\u00ad7", 6, "U+00AD SOFT HYPHEN (invisible)"),
    ],
)
def test_four10_a_target_reference_with_hidden_characters_is_refused(app, client, world, reference, position, what):
    """FOUR-10: `post:77\\u200b` looks like `post:77` but names another post with none of
    its history: 400 `reference_characters` naming the character and its position; no row."""
    before = counts()
    response = post(client, world, intake(reference=reference))
    assert response.status_code == 400
    body = response.get_json()
    assert body["error"]["code"] == "reference_characters", body
    assert body["error"]["field"] == "targets[0].reference"
    assert f"{what} at position {position}" in body["error"]["message"]
    assert counts() == before


def test_four10_an_author_reference_with_hidden_characters_is_refused(app, client, world):
    """FOUR-10: the evidence's author reference is a reference too."""
    before = counts()
    response = post(client, world, intake(evidence={**EVIDENCE, "author_reference": "user:9001\u2066"}))
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert (error["code"], error["field"]) == ("reference_characters", "targets[0].evidence.author_reference")
    assert "U+2066" in error["message"] and "position 9" in error["message"]
    assert counts() == before


MEDIA = {"url": "https://cdn.example/1.jpg", "sha256": "b" * 64, "mime_type": "image/png"}


@pytest.mark.parametrize(
    ("evidence", "field"),
    [
        ({"permalink": "https://example.social@evil.example/p/77"}, "targets[0].evidence.permalink"),
        ({"permalink": "https://user:pw@example.social/p/77"}, "targets[0].evidence.permalink"),
        ({"media": [{**MEDIA, "url": "https://cdn.example@evil.example/1.jpg"}]}, "targets[0].evidence.media[0].url"),
        ({"permalink": "https://example.social\\@evil.example/p/77"}, "targets[0].evidence.permalink"),
    ],
)
def test_four10_a_link_with_userinfo_is_refused_at_intake(app, client, world, evidence, field):
    """FOUR-10: `https://platform.example@evil.example/...` reads as the platform but opens
    evil.example: 400 `url_userinfo`; no row."""
    before = counts()
    response = post(client, world, intake(evidence=evidence))
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert (error["code"], error["field"]) == ("url_userinfo", field), error
    assert counts() == before


def test_four10_platform_text_is_isolated_and_links_name_their_host(app, client, world, platform):
    """FOUR-10: author names, post text and the report summary are rendered in `<bdi>`
    (a right-to-left name cannot reorder what follows it); each external link shows the
    host it opens."""
    evidence = {**EVIDENCE, "author_name": "\u202eevil_name", "content_text": "text \u202eReversed"}
    value = {**intake(evidence=evidence), "summary": "Users \u202ereported"}
    report_id = post(client, world, value).get_json()["report_id"]
    proposal = decide(world, report_id)
    login(client, "reviewer@example.com")
    for url in (f"/reports/{report_id}", f"/proposals/{proposal.id}", "/tasks"):
        html = client.get(url).get_data(as_text=True)
        assert "<bdi>\u202eevil_name</bdi>" in html, url
        assert "\u202eevil_name" not in html.replace("<bdi>\u202eevil_name</bdi>", ""), url
        if url != "/tasks":
            assert "<bdi>text \u202eReversed</bdi>" in html, url
        else:
            assert "<bdi>“text \u202eReversed”</bdi>" in html or "<bdi>text \u202eReversed</bdi>" in html
    html = client.get(f"/reports/{report_id}").get_data(as_text=True)
    assert "<bdi>Users \u202ereported</bdi>" in html
    assert "Open on example.social" in html  # the permalink's host
    assert re.search(r'class="link-host"[^>]*>cdn\.example<', html)  # the media link's host


def test_four10_an_appeal_statement_is_isolated(app, client, world, platform):
    """FOUR-10: the appellant's statement (platform-supplied text) is rendered in `<bdi>`
    on the appeal's page and in the appeals list."""
    from ..builders import approve, run_worker

    report_id = post(client, world, intake(evidence=EVIDENCE)).get_json()["report_id"]
    proposal = decide(world, report_id)
    approve(world, proposal)
    run_worker(app)
    appeal = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "ev-1", "statement": "satire \u202eesrever"},
    ).get_json()
    login(client, "reviewer@example.com")
    for url in (f"/appeals/{appeal['appeal_id']}", "/appeals"):
        assert "<bdi>satire \u202eesrever</bdi>" in client.get(url).get_data(as_text=True), url


def test_four10_the_platforms_own_report_and_appeal_ids_are_references_too(app, client, world, platform):
    """FOUR-10: a report's `external_id` (and an appeal's) names the platform's report: one
    with a zero-width space would look like a repeat yet be a second report. 400
    `reference_characters`; no row."""
    before = counts()
    response = post(client, world, intake(external_id="ev-1\u200b", evidence=EVIDENCE))
    assert response.status_code == 400
    assert (response.get_json()["error"]["code"], response.get_json()["error"]["field"]) == (
        "reference_characters",
        "external_id",
    )
    assert counts() == before

    from ..builders import approve, run_worker

    report_id = post(client, world, intake(evidence=EVIDENCE)).get_json()["report_id"]
    proposal = decide(world, report_id)
    approve(world, proposal)
    run_worker(app)
    before = counts()
    response = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "ev-1", "statement": "satire", "external_id": "appeal-1\u202e"},
    )
    assert response.status_code == 400
    assert (response.get_json()["error"]["code"], response.get_json()["error"]["field"]) == (
        "reference_characters",
        "external_id",
    )
    assert counts() == before
