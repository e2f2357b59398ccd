"""What a new user of the approval policies ran into (SPEC POL-3): routes naming
nothing that exists, and a bad settings document's problems reported in rounds."""

from __future__ import annotations

import pytest

from app.domain.errors import ApiError
from app.services.admin.approval_policies import propose_settings

from ..builders import PEER_AND_LEAD, pending_changes


def problems_of(world, document) -> list[str]:
    with pytest.raises(ApiError) as caught:
        propose_settings(world.user("admin"), document)
    assert (caught.value.status, caught.value.code) == (400, "approval_settings_invalid")
    assert pending_changes() == []
    return list(caught.value.problems)


def test_pol3_a_route_naming_an_unknown_component_or_action_code_is_refused(app, world):
    """POL-3: a route whose `component` or `action_code` the installation does not have
    would never match; proposing it is refused (``approval_settings_invalid``) naming the
    route and the unknown name; the demo's real names are accepted."""
    routes = [
        {"policies": ["peer_and_lead"], "component": "Suspend account"},
        {"policies": ["peer_and_lead"], "action_code": "ban"},
    ]
    problems = problems_of(world, {**PEER_AND_LEAD, "routes": routes})
    assert any(p.startswith("Route 1: no such component 'Suspend account'") for p in problems), problems
    assert any("Suspend the author's account" in p for p in problems), problems
    assert any(p.startswith("Route 2: no such action code 'ban'") for p in problems), problems
    good = [
        {"policies": ["peer_and_lead"], "component": "Suspend the author's account"},
        {"policies": ["peer_and_lead"], "action_code": "suspend_account"},
    ]
    assert propose_settings(world.user("admin"), {**PEER_AND_LEAD, "routes": good}) is not None
    assert len(pending_changes()) == 1


def test_pol3_every_problem_of_a_bad_document_is_reported_at_once(app, world):
    """POL-3: a document with a shape error (a factor without its required `label`) and
    problems of meaning (an unknown role, a route to an unknown policy, an unknown
    component) reports all of them in one refusal."""
    policy = {
        "key": "boss",
        "label": "Boss",
        "factors": [{"key": "b", "roles": ["boss"]}],
    }
    problems = problems_of(
        world,
        {"policies": [policy], "routes": [{"policies": ["nobody"], "component": "Nothing"}]},
    )
    text = "\n".join(problems)
    assert "'label' is a required property" in text
    assert "no such role boss" in text
    assert "unknown one (nobody)" in text
    assert "no such component 'Nothing'" in text
