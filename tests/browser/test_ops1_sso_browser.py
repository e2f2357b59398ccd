"""Single sign-on in Chromium against a real OpenID Connect provider on loopback
(SPEC OPS-1): a user signs in through the provider's page and lands with the role
their group maps to; their groups change at the provider; at the next sign-in they
have lost the role, and the page it opened answers 403."""

from __future__ import annotations

from playwright.sync_api import expect

from ..web.test_ops1_sso import operator, set_mapping
from .test_console_stories import sign_out


def sign_in_through_the_provider(page, idp, sub: str) -> None:
    """The sign-in page's button, then the provider's own page: type the subject, authorize."""
    page.goto("/login")
    page.get_by_role("link", name="Sign in with Example IdP").click()
    assert page.url.startswith(f"{idp.issuer}/oauth2/authorize?")
    page.locator("input[name=sub]").fill(sub)
    page.get_by_role("button", name="Authorize").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()  # landed by role (QUEUE-5)


def test_ops1_a_user_removed_from_a_group_loses_the_role_at_next_sign_in(app, page, idp, screenshots):
    """OPS-1: in the ts-auditors group the user reaches Administration; removed from
    it at the provider, their next sign-in leaves them a moderator and /admin/ is 403."""
    set_mapping(app, app.test_client(), "ts-moderators = moderator\nts-auditors = auditor")
    idp.set_user("olga-sub", email="olga@idp.example.org", name="Olga", groups=["ts-moderators", "ts-auditors"])
    page.goto("/login")
    page.screenshot(path=screenshots / "ops1-sso-sign-in-page.png")
    sign_in_through_the_provider(page, idp, "olga-sub")
    assert page.goto("/admin/").status == 200
    expect(page.get_by_role("heading", name="Administration")).to_be_visible()
    page.goto("/admin/sso")
    expect(page.locator("#sso-mapping")).to_contain_text("ts-auditors")
    page.screenshot(path=screenshots / "ops1-sso-auditor.png", full_page=True)
    assert operator("olga@idp.example.org").roles == {"moderator", "auditor"}

    idp.set_user("olga-sub", email="olga@idp.example.org", name="Olga", groups=["ts-moderators"])
    sign_out(page)
    sign_in_through_the_provider(page, idp, "olga-sub")
    assert operator("olga@idp.example.org").roles == {"moderator"}
    assert page.goto("/admin/").status == 403
    assert page.goto("/queue").status == 200
    page.screenshot(path=screenshots / "ops1-sso-moderator.png")
    # Network refusals are expected (the 403 above; the provider's page links a CDN
    # stylesheet this machine cannot reach); no script error is.
    assert [error for error in page.js_errors if not error.startswith("Failed to load resource")] == []
