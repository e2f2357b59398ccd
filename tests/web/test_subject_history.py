"""Subject history on the review pages (REV-2): the other reports, decisions and actions
on the same target and on its author's account, newest first, with states and links."""

from __future__ import annotations

import re

from ..builders import add_report_with_evidence, approve, decide, decide_report, login, make_world, run_worker


def history_section(html: str) -> str:
    match = re.search(r'<section class="card history".*?</section>', html, re.S)
    assert match, "no history section on the page"
    return match.group(0)


def test_history_shows_same_author_and_same_target_newest_first(app, client, world, platform):
    """REV-2: an earlier applied action on the author's other post and a report on the same
    post appear, newest first, with their decision, action state and links."""
    earlier = decide_report(world, 1)  # post:1002, by the same author as post:1001 (user:4412)
    approve(world, earlier)
    run_worker(app)
    same_post = add_report_with_evidence(world, "again-1001", "post:1001", content_text="still there")
    about_account = add_report_with_evidence(world, "account-4412", "user:4412")
    unrelated = add_report_with_evidence(world, "other", "post:555", author_reference="user:1")
    proposal = decide_report(world, 0)

    login(client, "reviewer@example.com")
    for url in (f"/proposals/{proposal.id}", f"/reports/{world.report_ids[0]}"):
        section = history_section(client.get(url).get_data(as_text=True))
        order = [m for m in re.findall(r'href="/reports/([^"]+)"', section)]
        assert order == [about_account, same_post, world.report_ids[1]]  # newest first
        assert unrelated not in section and world.report_ids[0] not in order
        assert (
            "same target" in section and "by the same author" in section and "about the author&#39;s account" in section
        )
        assert f'href="/proposals/{earlier.id}"' in section
        assert "Applied on the platform" in section and "Remove content" in section
        assert "Maya Moderator" in section


def test_history_never_crosses_installations(app, client, world, platform):
    """REV-2: another team's reports on the same post and author stay out of the history."""
    other = make_world(platform.url, slug="other-team")
    decide_report(other, 1)
    proposal = decide_report(world, 0)
    login(client, "reviewer@example.com")
    section = history_section(client.get(f"/proposals/{proposal.id}").get_data(as_text=True))
    shown = re.findall(r'href="/reports/([^"]+)"', section)
    assert shown == [world.report_ids[1]]  # this team's report on the author's other post only
    assert not set(other.report_ids) & set(shown)


def test_appeal_page_shows_history_too(app, client, world, platform):
    """REV-2: the appeal page has the subject history."""
    earlier = decide(world, world.report_ids[1])
    proposal = decide_report(world, 0)
    approve(world, proposal)
    run_worker(app)
    appeal = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "demo-report-1", "statement": "satire"},
    ).get_json()
    login(client, "reviewer@example.com")
    section = history_section(client.get(f"/appeals/{appeal['appeal_id']}").get_data(as_text=True))
    assert f'href="/proposals/{earlier.id}"' in section
