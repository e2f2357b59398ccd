"""A second factor in the browser (SPEC OPS-2): a reviewer with no second factor signs
in with their password, enrols (the seed as text), sees their recovery codes once,
signs out, and signs in again with a code; a wrong code and an expired step are
refused with the same words (SEC-6)."""

from __future__ import annotations

import pyotp
from playwright.sync_api import expect

from app.domain.second_factor import REFUSAL
from app.services.admin.operators import create_operator
from app.services.uow import Actor

from ..builders import totp_code

PASSWORD = "rosa-chose-this-one"
EMAIL = "rosa@example.com"


def password_step(page) -> None:
    page.goto("/login")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()


def test_ops2_a_reviewer_enrols_sees_recovery_codes_and_signs_in_with_a_code(app, page, world, screenshots):
    create_operator(
        world.installation_id, email=EMAIL, password=PASSWORD, display_name="Rosa", roles=["reviewer"],
        actor=Actor.system("test"),
    )
    password_step(page)
    expect(page.get_by_role("heading", name="Set up a second factor")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)  # not signed in yet
    seed = page.locator(".totp-seed").inner_text()
    assert page.locator(".totp-uri").inner_text().startswith("otpauth://totp/")
    page.get_by_label("Code").fill(pyotp.TOTP(seed).now())
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    expect(page.locator(".recovery-codes li")).to_have_count(10)
    page.screenshot(path=str(screenshots / "ops2-recovery-codes.png"))
    page.get_by_role("link", name="I have saved them").click()
    page.get_by_role("button", name="Sign out").click()

    password_step(page)  # a wrong code: refused, back to the password
    expect(page.get_by_role("heading", name="Enter a code")).to_be_visible()
    page.get_by_label("Code").fill("ABCDE-FGHJK")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text(REFUSAL)
    wrong = page.get_by_role("alert").inner_text()

    password_step(page)  # an expired step: the same words
    expect(page.get_by_role("heading", name="Enter a code")).to_be_visible()
    app.config["SECOND_FACTOR_PENDING_SECONDS"] = 0
    page.wait_for_timeout(1100)
    page.get_by_label("Code").fill(pyotp.TOTP(seed).now())
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert page.get_by_role("alert").inner_text() == wrong
    app.config["SECOND_FACTOR_PENDING_SECONDS"] = 300

    password_step(page)  # a current code signs in
    page.get_by_label("Code").fill(totp_code(EMAIL, seed=seed))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
