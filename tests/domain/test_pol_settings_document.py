"""The approval settings document's checks and words (SPEC POL-1, POL-3), and an
operator's team and attributes as admins type them."""

from __future__ import annotations

from app.domain.approval_policy import DEFAULT_SETTINGS, settings_from_json, settings_to_json
from app.domain.approval_settings import (
    change_words,
    document_problems,
    normalised,
    parse_attributes,
    settings_words,
    team_problem,
)

ROLES = ("moderator", "reviewer", "admin", "auditor")
PEER_AND_LEAD = {
    "policies": [
        {
            "key": "peer_and_lead",
            "label": "A peer and a lead",
            "ttl_seconds": 5400,
            "factors": [
                {"key": "peer", "label": "peer", "count": 2, "roles": ["reviewer"]},
                {"key": "lead", "label": "lead", "roles": ["reviewer", "admin"], "teams": ["trust"],
                 "attributes": {"level": "lead"}, "deny_count": 2},
            ],
        }
    ],
    "routes": [{"policies": ["peer_and_lead"], "protected": True}],
}


def test_pol3_the_defaults_and_a_peer_and_lead_document_are_valid_and_round_trip():
    """POL-3: the built-in defaults and a "peers + lead" document pass; normalising fills
    in the defaults (the default policy, reason on reject) and is stable."""
    assert document_problems(settings_to_json(DEFAULT_SETTINGS), ROLES) == []
    assert document_problems(PEER_AND_LEAD, ROLES) == []
    once = normalised(PEER_AND_LEAD)
    assert normalised(once) == once and {p["key"] for p in once["policies"]} == {"peer_and_lead", "default"}


def test_pol3_shape_and_meaning_problems_are_named_with_their_place():
    """POL-3: a value of the wrong type, an unknown key, a duplicate policy key, an
    unknown role and a route to an unknown policy are each named."""
    wrong_type = {**PEER_AND_LEAD, "routes": [{"policies": ["peer_and_lead"], "protected": "yes"}]}
    assert document_problems(wrong_type, ROLES) == ["At routes/0/protected: 'yes' is not of type 'boolean', 'null'"]
    assert "Additional properties" in document_problems({**PEER_AND_LEAD, "colour": "red"}, ROLES)[0]
    twice = {**PEER_AND_LEAD, "policies": PEER_AND_LEAD["policies"] * 2}
    assert "Policy keys must be distinct." in document_problems(twice, ROLES)
    assert any("no such role reviewer" in p for p in document_problems(PEER_AND_LEAD, ("admin",)))
    unknown = {**PEER_AND_LEAD, "routes": [{"policies": ["ghost"]}]}
    assert document_problems(unknown, ROLES) == ["Route 1 names no policy or an unknown one (ghost)."]
    assert document_problems([], ROLES) == ["[] is not of type 'object'"]


def test_pol1_pol3_the_settings_in_words():
    """POL-1, POL-3: each factor with its count, who is eligible and its deny count; the
    time to live; whether a rejection needs a reason; the routes in order, then the default."""
    words = settings_words(settings_from_json(PEER_AND_LEAD))
    [policy, default] = words.policies
    assert policy.factors == (
        "2 peers (role reviewer); 1 rejection vetoes",
        "1 lead (role reviewer or admin, team trust, level = lead); 2 rejections veto",
    )
    assert policy.time_to_live == "an approval counts for 90 min" and policy.rejection == "a rejection needs a reason"
    assert default.rejection == "a rejection's reason is optional"
    assert words.routes == ("When a protected subject: A peer and a lead [peer_and_lead]",)
    assert words.otherwise == "Otherwise: One reviewer [default]"
    assert change_words(PEER_AND_LEAD)["routes"][-1] == "Otherwise: One reviewer [default]"


def test_pol1_team_and_attributes_as_typed():
    """POL-1: a team is one word; attributes are key=value pairs, at most 10, each key once."""
    assert team_problem("trust-leads") is None and team_problem("") is None and team_problem("Trust leads")
    assert parse_attributes("level=lead, region = eu\n") == ({"level": "lead", "region": "eu"}, None)
    assert parse_attributes("") == ({}, None)
    for bad in ("level", "Level=lead", "level=a=b", "level=lead,level=senior", ",".join(f"k{n}=v" for n in range(11))):
        pairs, problem = parse_attributes(bad)
        assert pairs is None and problem, bad
