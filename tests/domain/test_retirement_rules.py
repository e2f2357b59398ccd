"""A retired component version stops new preparation only (SPEC FOUR-7): the predicate
and the count the retirement page shows, over plain values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.domain.proposal.retirement import VersionUse, may_use_retired_version, prepared_versions, version_users

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LATER = NOW + timedelta(days=1)
REVERSAL = {"duration_seconds": 3600, "reversal": {"component_version_id": "cmv_un", "action_code": "unsuspend"}}


def use(id_, state, version, *, terminal=False, expires=LATER, temporary=None, reverses=None) -> VersionUse:
    return VersionUse(id_, state, terminal, expires, version, temporary, reverses)


def test_four7_a_retired_version_serves_only_what_was_prepared_with_it():
    """FOUR-7: new preparation (nothing prepared before) may not use a retired version;
    a proposal prepared with it, or following one prepared with it (its reversal's too), may."""
    assert not may_use_retired_version("cmv_a", ())
    assert may_use_retired_version("cmv_a", prepared_versions("cmv_a", None))
    assert may_use_retired_version("cmv_un", prepared_versions("cmv_sus", REVERSAL))
    assert not may_use_retired_version("cmv_b", prepared_versions("cmv_sus", REVERSAL))
    assert prepared_versions(None, {"reversal": {}}) == ()


def test_four7_version_users_counts_each_action_that_still_needs_the_version():
    """FOUR-7: open, retryable failed-for-good and in-force temporary actions count once
    each; an expired failure, an applied action and a failed reversal of an ended action
    count nothing."""
    rows = [
        use("p_open", "queued", "cmv_a"),
        use("p_failed", "failed", "cmv_a", terminal=True),
        use("p_expired", "failed", "cmv_a", terminal=True, expires=NOW - timedelta(seconds=1)),
        use("p_done", "applied", "cmv_a"),
        use("p_retrying", "failed", "cmv_a"),
    ]
    assert version_users("cmv_a", rows, NOW) == 3
    suspension = use("sus", "applied", "cmv_sus", temporary=REVERSAL)
    failed_reversal = use("rev", "failed", "cmv_un", terminal=True, reverses="sus")
    assert version_users("cmv_un", [suspension, failed_reversal], NOW) == 1
    assert version_users("cmv_un", [suspension], NOW) == 1
    ended = use("end", "applied", "cmv_un", reverses="sus")
    assert version_users("cmv_un", [suspension, failed_reversal, ended], NOW) == 0
    assert version_users("cmv_sus", [suspension, failed_reversal], NOW) == 0


def test_four7_one_predicate_decides_for_every_caller():
    """FOUR-7: the component check that preparation, follow-ups and delivery share calls
    the one domain predicate; preparation, compensation and appeal corrections pass
    the versions of the proposal they repeat or follow."""
    import inspect

    from app.services.cases import appeals
    from app.services.lifecycle import action_targets as components
    from app.services.lifecycle import compensation, prepare

    assert "may_use_retired_version(" in inspect.getsource(components)
    for module in (prepare, compensation, appeals):
        assert "prepared_versions(" in inspect.getsource(module)
