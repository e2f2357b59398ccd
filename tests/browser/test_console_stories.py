"""The main stories in a real browser: decide, approve, watch it apply live; htmx
posts carry CSRF; maker/checker in the page; retry into delivery cycle 2."""

from __future__ import annotations


from playwright.sync_api import expect

from app.demo import DEMO_PASSWORD

from ..builders import decide_report, proposal_of
from .conftest import POLL_SECONDS, pass_second_factor


def sign_in(page, email):
    page.goto("/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    pass_second_factor(page, email)
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()  # landed by role (QUEUE-5)


def sign_out(page):
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def approve_in_page(page, proposal_id):
    page.goto(f"/proposals/{proposal_id}")
    digest = page.locator("#payload-digest").inner_text()
    page.get_by_label("Approve").check()
    page.get_by_label("Payload digest you reviewed").fill(digest)
    page.get_by_role("button", name="Record decision").click()


def test_decide_approve_and_watch_it_apply(page, world, platform, screenshots):
    """Moderator decides; reviewer approves; the page turns applied by itself, then stops polling."""
    sign_in(page, "moderator@example.com")
    page.goto(f"/reports/{world.report_ids[0]}")
    page.get_by_label("Decision", exact=True).select_option("remove_content")
    page.get_by_label("Rationale").fill("Targeted harassment of another user")
    page.get_by_role("button", name="Record decision").click()
    expect(page.locator("table").get_by_text("Waiting for approval")).to_be_visible()
    proposal = proposal_of(world.report_ids[0])
    sign_out(page)

    sign_in(page, "reviewer@example.com")
    page.goto("/tasks")
    expect(page.get_by_role("link", name="Take the content down")).to_be_visible()
    page.screenshot(path=str(screenshots / "approval-queue.png"), full_page=True)

    live_requests: list[str] = []
    page.on("request", lambda request: live_requests.append(request.url) if request.url.endswith("/live") else None)
    navigations: list[str] = []
    approve_in_page(page, proposal.id)
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    expect(page.locator('#live[data-terminal="true"]')).to_be_attached(timeout=30_000)  # swapped in by htmx
    expect(page.locator("#live .badge.state-applied")).to_be_visible()
    polls_until_terminal = len(live_requests)
    assert navigations == [], "the page reloaded; it should update in place"
    assert live_requests, "the detail page never polled"
    page.wait_for_timeout(POLL_SECONDS * 3 * 1000)  # three polling intervals of silence
    assert len(live_requests) == polls_until_terminal  # none since
    expect(page.locator("#live")).to_contain_text("workflow.action_applied")
    page.screenshot(path=str(screenshots / "proposal-detail.png"), full_page=True)
    assert platform.state.content["post:1001"] == "removed"

    page.goto("/proposals")
    expect(page.get_by_role("link", name="Take the content down")).to_be_visible()
    page.screenshot(path=str(screenshots / "proposals-list.png"), full_page=True)
    assert page.js_errors == []


def test_htmx_post_needs_the_csrf_token(page, world):
    """An htmx claim without the CSRF token is refused; with it, it succeeds."""
    decide_report(world)
    sign_in(page, "reviewer@example.com")
    page.goto("/tasks")
    page.evaluate("""() => {
        document.body.removeAttribute('hx-headers');
        document.querySelectorAll('input[name=csrf_token]').forEach(el => el.remove());
    }""")
    with page.expect_response(lambda r: "/claim" in r.url) as answer:
        page.get_by_role("button", name="Claim").click()
    assert answer.value.status == 400
    expect(page.locator("#flash")).to_contain_text("csrf_invalid")
    page.reload()
    with page.expect_response(lambda r: "/claim" in r.url) as answer:
        page.get_by_role("button", name="Claim").click()
    assert answer.value.status == 200 and answer.value.request.headers.get("x-csrftoken")
    expect(page.get_by_role("button", name="Release")).to_be_visible()
    expect(page.locator("#flash")).to_be_empty()


def test_reviewer_cannot_approve_their_own(page, world):
    """The maker sees why the approval is disabled."""
    proposal = decide_report(world, maker="reviewer2")
    sign_in(page, "reviewer2@example.com")
    page.goto(f"/proposals/{proposal.id}")
    expect(page.get_by_text("You cannot decide this action.")).to_be_visible()
    expect(page.get_by_role("button", name="Approve")).to_be_disabled()
    expect(page.get_by_role("button", name="Record decision")).to_have_count(0)


def test_failed_delivery_is_retried_into_cycle_two(page, world, platform):
    """A terminal failure is retried from the page and applied in delivery cycle 2."""
    platform.state.configure(fail_next=1, fail_status=400)
    proposal = decide_report(world)
    sign_in(page, "reviewer@example.com")
    approve_in_page(page, proposal.id)
    retry = page.get_by_role("button", name="Retry delivery (starts cycle 2)")
    expect(retry).to_be_visible(timeout=30_000)
    expect(page.locator("#live")).to_contain_text("platform_client_error")
    retry.click()
    expect(page.locator('#live[data-terminal="true"] .badge.state-applied')).to_be_visible(timeout=30_000)
    expect(page.locator("#live")).to_contain_text("Delivery cycle 2")
    assert platform.state.content["post:1001"] == "removed"


def test_expired_session_redirects_the_whole_page(page, world):
    """An htmx poll with an expired session sends the page to the login form."""
    proposal = decide_report(world)
    sign_in(page, "reviewer@example.com")
    page.goto(f"/proposals/{proposal.id}")
    page.context.clear_cookies()
    page.wait_for_url("**/login**", timeout=20_000)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_narrow_screen_is_usable(page, world, screenshots):
    proposal = decide_report(world)
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "reviewer@example.com")
    page.goto(f"/proposals/{proposal.id}")
    expect(page.get_by_role("button", name="Record decision")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, f"horizontal scroll on a phone: {width}px"
    page.screenshot(path=str(screenshots / "proposal-detail-narrow.png"), full_page=True)
