"""The transparency report in Chromium at 1280 px (SPEC DSA-6): the period form, the
server-drawn SVG charts with one bar per value above 0, each with its <title>, and no
Content-Security-Policy violation and no script error."""

from __future__ import annotations

from playwright.sync_api import expect

from ..builders import set_dsa_settings
from ..transparency_history import build_history
from .test_console_stories import sign_in

CSP_LISTENER = (
    "window.cspViolations = []; document.addEventListener('securitypolicyviolation',"
    " function (e) { window.cspViolations.push(e.violatedDirective + ' ' + e.sample); });"
)
# November 2026 of tests/transparency_history.py: bars per chart (values above 0)
BARS = {"category": 4, "ground": 2, "restriction": 4, "automated_decision": 3, "appeals": 3}


def test_the_report_page_draws_its_charts_without_a_csp_violation_DSA_6(page, world, screenshots):
    """DSA-6: an auditor opens Transparency from the menu, chooses November 2026 in the
    form and sees five SVG charts with the right number of bars, each named by its
    <title>, beside the tables; the page breaks no CSP rule."""
    set_dsa_settings(world.installation_id)
    build_history(world)
    page.add_init_script(CSP_LISTENER)
    sign_in(page, "auditor@example.com")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Transparency").click()
    expect(page.get_by_role("heading", name="Transparency report", level=1)).to_be_visible()
    page.get_by_label("First day").fill("2026-11-01")
    page.get_by_label("Up to (not included)").fill("2026-12-01")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#period-summary")).to_contain_text("From 2026-11-01 to 2026-11-30 included (30 days)")
    charts = page.locator("svg.chart")
    expect(charts).to_have_count(len(BARS))
    for key, bars in BARS.items():
        chart = page.locator(f"svg#chart-{key}")
        expect(chart).to_be_visible()
        expect(chart.locator("rect.chart-bar")).to_have_count(bars)
        assert chart.locator("title").text_content()
        box = chart.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 30, (key, box)
    speech = page.locator('svg#chart-category g[data-key="STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"]')
    expect(speech.locator("text.chart-value")).to_have_text("4")
    widths = page.locator("svg#chart-category rect.chart-bar").evaluate_all(
        "(bars) => bars.map((b) => b.getBoundingClientRect().width)"
    )
    assert max(widths) == widths[0] and all(w > 0 for w in widths)  # the longest bar is the largest count
    fill = page.locator("svg#chart-ground rect.chart-bar").first.evaluate("(b) => getComputedStyle(b).fill")
    assert fill not in ("", "none", "rgb(0, 0, 0)")  # coloured by console.css, not by an inline style
    expect(page.get_by_role("link", name="Download CSV")).to_have_attribute(
        "href", "/transparency.csv?from=2026-11-01&to=2026-12-01"
    )
    page.screenshot(path=str(screenshots / "transparency-1280.png"), full_page=True)
    expect(page.get_by_text("Statements of reasons are off")).to_have_count(0)
    assert page.evaluate("window.cspViolations") == [] and page.js_errors == []
