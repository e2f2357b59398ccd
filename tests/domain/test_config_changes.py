"""Pure rules for configuration changes: which need a second admin (FOUR-2), who may
approve one, the diff a change page shows, and origins of connection URLs (SEC-4)."""

import pytest

from app.domain.config_changes import (
    ALWAYS,
    ChangeKind,
    change_approver_verdict,
    content_diff,
    origin,
    second_admin_reasons,
    secrets_need_reentry,
)

K = ChangeKind
NEW_VERSION = ALWAYS[K.CONNECTION_VERSION]  # FOUR-4: every connection version waits
CONNECTION_NOW = {
    "base_url": "https://api.example.com/v1",
    "allowed_hosts": ["api.example.com"],
    "bearer_token": True,
    "signing_secret": True,
}
CREATES = "It creates an account, which a second admin confirms."  # FOUR-6
SAME_PLACE = {
    "base_url": "https://api.example.com/v2",
    "allowed_hosts": ["api.example.com"],
    "bearer_token": "keep",
    "signing_secret": "keep",
}


@pytest.mark.parametrize(
    "kind, proposed, current, needs",
    [
        (K.WORKFLOW_CREATE, {"authority_mode": "bounded_auto"}, None, True),
        (K.WORKFLOW_CREATE, {"authority_mode": "assist"}, None, True),
        (K.WORKFLOW_VERSION, {"authority_mode": "bounded_auto"}, {"authority_mode": "bounded_auto"}, True),
        (K.WORKFLOW_VERSION, {"authority_mode": "shadow"}, {"authority_mode": "bounded_auto"}, True),
        (K.COMPONENT_CREATE, {"approval_mode": "bounded_auto"}, None, True),
        (K.COMPONENT_VERSION, {"approval_mode": "bounded_auto"}, {"approval_mode": "human"}, True),
        (K.COMPONENT_VERSION, {"approval_mode": "human"}, {"approval_mode": "bounded_auto"}, True),
        (K.BUDGET_LIMIT, {"limit_amount": 11}, {"limit_amount": 10, "active": True}, True),
        (K.BUDGET_LIMIT, {"limit_amount": 11}, {"limit_amount": 10, "active": False}, True),
        (K.BUDGET_LIMIT, {"limit_amount": 10}, {"limit_amount": 10, "active": True}, False),
        (K.BUDGET_LIMIT, {"limit_amount": 2}, {"limit_amount": 10, "active": True}, False),
        (K.BUDGET_ACTIVE, {"active": False}, {"active": True}, True),
        (K.BUDGET_ACTIVE, {"active": True}, {"active": False}, True),
        (K.BUDGET_ACTIVE, {"active": False}, {"active": False}, False),
        (K.OPERATOR_CREATE, {"roles": ["moderator", "auditor"]}, None, True),  # FOUR-6: every account
        (K.OPERATOR_INVITE, {"delivery": "approver"}, None, True),  # FOUR-6: the link is seen by an admin
        (K.OPERATOR_INVITE, {"delivery": "mail"}, None, False),  # FOUR-6: the link goes to the invitee only
        (K.OPERATOR_CREATE, {"roles": ["moderator", "reviewer"]}, None, True),
        (K.OPERATOR_CREATE, {"roles": ["admin"]}, None, True),
        (K.OPERATOR_ROLES, {"roles": ["moderator", "reviewer"]}, {"roles": ["moderator"]}, True),
        (K.OPERATOR_ROLES, {"roles": ["admin", "reviewer"]}, {"roles": ["reviewer"]}, True),
        (K.OPERATOR_ROLES, {"roles": ["reviewer"]}, {"roles": ["admin", "reviewer"]}, False),
        (K.OPERATOR_ROLES, {"roles": ["auditor", "reviewer"]}, {"roles": ["reviewer"]}, True),
        (K.CONNECTION_VERSION, SAME_PLACE, CONNECTION_NOW, True),  # a new path (FOUR-4)
        (K.CONNECTION_VERSION, {**SAME_PLACE, "base_url": "https://evil.example/v1"}, CONNECTION_NOW, True),
        (K.CONNECTION_VERSION, {**SAME_PLACE, "base_url": "http://api.example.com/v1"}, CONNECTION_NOW, True),
        (K.CONNECTION_VERSION, {**SAME_PLACE, "base_url": "https://api.example.com:8443/"}, CONNECTION_NOW, True),
        (K.CONNECTION_VERSION, {**SAME_PLACE, "base_url": "https://API.example.com:443/v9"}, CONNECTION_NOW, True),
        (K.CONNECTION_VERSION, {**SAME_PLACE, "allowed_hosts": ["api.example.com", "x.example"]}, CONNECTION_NOW, True),
        (K.CONNECTION_VERSION, {**SAME_PLACE, "bearer_token": "set"}, CONNECTION_NOW, True),
        (K.CONNECTION_VERSION, {**SAME_PLACE, "bearer_token": "none"}, CONNECTION_NOW, True),
        (K.CONNECTION_VERSION, {**SAME_PLACE, "signing_secret": "generate"}, CONNECTION_NOW, True),
        (
            K.CONNECTION_VERSION,
            {**SAME_PLACE, "signing_secret": "none"},
            {**CONNECTION_NOW, "signing_secret": False},
            True,
        ),
    ],
)
def test_which_changes_need_a_second_admin(kind, proposed, current, needs):
    """FOUR-2: bounded_auto versions, raised or removed budgets, a connection's new
    destination or secrets, and granted reviewer/admin roles need a second admin;
    changes that weaken nothing apply at once."""
    reasons = second_admin_reasons(kind, proposed, current)
    assert bool(reasons) is needs, reasons
    assert all(isinstance(reason, str) and reason.endswith(".") for reason in reasons)


def test_every_reason_of_a_connection_change_is_named():
    """FOUR-2: the page says each way the change weakens the connection."""
    proposed = {
        "base_url": "http://evil.example:8080/",
        "allowed_hosts": ["evil.example"],
        "bearer_token": "set",
        "signing_secret": "generate",
    }
    reasons = second_admin_reasons("connection.version", proposed, CONNECTION_NOW)
    assert reasons == [
        "It moves the destination from https://api.example.com:443 to http://evil.example:8080.",
        "It changes the allowed hosts.",
        "It changes the bearer token.",
        "It changes the signing secret.",
    ]


def test_an_unknown_kind_is_an_error():
    with pytest.raises(ValueError):
        second_admin_reasons("budget.delete", {}, None)


@pytest.mark.parametrize(
    "approver, roles, subject, allowed, reason",
    [
        ("op_b", {"admin"}, None, True, None),
        ("op_a", {"admin", "reviewer"}, None, False, "You proposed this change"),
        ("op_b", {"reviewer"}, None, False, "Only admins"),
        ("op_b", {"admin"}, "op_b", False, "grants you a role"),
        ("op_c", {"admin"}, "op_b", True, None),
    ],
)
def test_who_may_approve_a_change(approver, roles, subject, allowed, reason):
    """FOUR-2: a second admin approves, never the proposer nor the operator a grant is for."""
    verdict = change_approver_verdict(approver, roles, "op_a", subject)
    assert verdict.allowed is allowed
    assert (reason is None and verdict.reason is None) or reason in verdict.reason


def test_the_diff_lists_what_the_change_sets_against_now():
    """FOUR-2: the change page's diff: changed plain values, and JSON as a unified diff."""
    now = {"authority_mode": "assist", "graph": {"start": "a", "nodes": {"a": {"mode": "human"}}}, "version": 1}
    proposed = {"authority_mode": "bounded_auto", "graph": {"start": "a", "nodes": {"a": {"mode": "auto"}}}}
    mode, graph = content_diff(now, proposed)
    assert (mode.name, mode.before, mode.after, mode.changed, mode.lines) == (
        "authority_mode",
        "assist",
        "bounded_auto",
        True,
        (),
    )
    assert graph.changed and '-      "mode": "human"' in graph.lines and '+      "mode": "auto"' in graph.lines
    [same] = content_diff({"limit_amount": 5}, {"limit_amount": 5})
    assert not same.changed
    [new] = content_diff(None, {"roles": ["admin"]})
    assert new.before is None and new.changed and new.lines[0] == "--- now"


@pytest.mark.parametrize(
    "previous, new, reentry",
    [
        ("https://a.example/v1", "https://a.example/v2", False),
        ("https://a.example", "https://a.example:443/x", False),
        ("http://a.example", "http://A.EXAMPLE:80/", False),
        ("https://a.example", "http://a.example", True),
        ("https://a.example", "https://b.example", True),
        ("http://127.0.0.1:5050", "http://127.0.0.1:5051", True),
        ("https://a.example", "https://a.example.evil.example", True),
    ],
)
def test_a_new_origin_needs_the_secrets_again(previous, new, reentry):
    """SEC-4: origin = scheme, host, port (default ports filled in)."""
    assert secrets_need_reentry(previous, new) is reentry
    assert origin("HTTPS://Api.Example.com/v1") == ("https", "api.example.com", 443)


# --- what each reason says, and the edges of each rule ------------------------------


@pytest.mark.parametrize(
    "kind, proposed, current, reasons",
    [
        (
            K.WORKFLOW_VERSION,
            {"authority_mode": "bounded_auto"},
            None,
            ["It publishes a bounded_auto workflow version: its actions run without a second person."],
        ),
        (
            "component.version",
            {"approval_mode": "bounded_auto"},
            None,
            ["It publishes a bounded_auto component version: its actions run without a second person."],
        ),
        (K.COMPONENT_CREATE, {"approval_mode": "human"}, None, [ALWAYS[K.COMPONENT_CREATE]]),
        (K.WORKFLOW_CREATE, {}, None, [ALWAYS[K.WORKFLOW_CREATE]]),
        (K.BUDGET_LIMIT, {"limit_amount": 11}, {"limit_amount": 10}, ["It raises a budget's limit from 10 to 11."]),
        (K.BUDGET_LIMIT, {"limit_amount": 11}, None, []),  # no limit before: nothing is raised
        (K.BUDGET_LIMIT, {"limit_amount": "11"}, {"limit_amount": 10}, []),
        (
            K.BUDGET_ACTIVE,
            {"active": False},
            {"active": True},
            ["It deactivates a budget: its scope is no longer bounded."],
        ),
        (K.BUDGET_ACTIVE, {}, {"active": True}, ["It deactivates a budget: its scope is no longer bounded."]),
        (K.BUDGET_ACTIVE, {"active": False}, None, []),
        (K.OPERATOR_CREATE, {"roles": ["moderator"]}, None, [CREATES, "It grants the moderator role."]),
        (K.OPERATOR_CREATE, {"roles": ["reviewer"]}, None, [CREATES, "It grants the reviewer role."]),
        (
            K.OPERATOR_CREATE,
            {"roles": ["reviewer", "admin"]},
            None,
            [CREATES, "It grants the admin and reviewer roles."],
        ),
        (K.OPERATOR_ROLES, {"roles": ["admin", "reviewer"]}, {"roles": ["reviewer"]}, ["It grants the admin role."]),
        (K.OPERATOR_ROLES, {"roles": None}, {"roles": ["admin"]}, []),
        (K.OPERATOR_ROLES, {"roles": ["admin"]}, {"roles": None}, ["It grants the admin role."]),
    ],
)
def test_four2_each_reason_is_a_sentence_for_the_change_page(kind, proposed, current, reasons):
    """FOUR-2: the change page names what makes the change need a second admin."""
    assert second_admin_reasons(kind, proposed, current) == reasons


@pytest.mark.parametrize(
    "proposed, reasons",
    [
        ({**SAME_PLACE, "allowed_hosts": ["api.example.com"]}, [NEW_VERSION]),
        ({"base_url": "https://api.example.com/v2", "allowed_hosts": ["api.example.com"]}, [NEW_VERSION]),
        (
            {**SAME_PLACE, "bearer_token": "none", "signing_secret": "set"},
            ["It changes the bearer token.", "It changes the signing secret."],
        ),
        ({**SAME_PLACE, "allowed_hosts": []}, ["It changes the allowed hosts."]),
        ({**SAME_PLACE, "allowed_hosts": None}, ["It changes the allowed hosts."]),
    ],
)
def test_four2_connection_reasons(proposed, reasons):
    """FOUR-2: each way a connection version weakens what exists, by name."""
    assert second_admin_reasons(K.CONNECTION_VERSION, proposed, CONNECTION_NOW) == reasons


def test_four2_allowed_hosts_compare_as_a_set_of_names():
    now = {**CONNECTION_NOW, "allowed_hosts": ["b.example", "a.example"]}
    proposed = {**SAME_PLACE, "allowed_hosts": ["a.example", "b.example"]}
    assert second_admin_reasons(K.CONNECTION_VERSION, proposed, now) == [NEW_VERSION]
    empty = {**SAME_PLACE, "allowed_hosts": []}
    assert second_admin_reasons(K.CONNECTION_VERSION, empty, {"allowed_hosts": None}) == [NEW_VERSION]


def test_four2_a_new_connection_names_its_secrets_not_a_move():
    """FOUR-2: a first version has no destination to move from; setting its secrets is named."""
    proposed = {"base_url": "https://api.example.com", "bearer_token": "set", "signing_secret": "none"}
    assert second_admin_reasons(K.CONNECTION_VERSION, proposed, None) == ["It changes the bearer token."]


def test_four2_removing_a_secret_that_was_never_set_changes_nothing():
    now = {**CONNECTION_NOW, "bearer_token": False, "signing_secret": False}
    assert second_admin_reasons(K.CONNECTION_VERSION, {**SAME_PLACE, "bearer_token": "none"}, now) == [NEW_VERSION]
    assert second_admin_reasons(K.CONNECTION_VERSION, {**SAME_PLACE, "bearer_token": "keep"}, now) == [NEW_VERSION]
    assert second_admin_reasons(K.CONNECTION_VERSION, {**SAME_PLACE, "bearer_token": "set"}, now) == [
        "It changes the bearer token."
    ]


@pytest.mark.parametrize(
    "approver, roles, subject, reason",
    [
        ("op_b", ["admin"], None, None),
        ("op_b", ("reviewer", "admin"), None, None),
        ("op_a", {"admin"}, None, "You proposed this change; a second admin must approve it."),
        ("op_b", (), None, "Only admins can approve configuration changes."),
        ("op_a", ["reviewer"], None, "Only admins can approve configuration changes."),
        ("op_b", {"admin"}, "op_b", "This change grants you a role; another admin must approve it."),
    ],
)
def test_four2_the_refusal_says_who_must_approve(approver, roles, subject, reason):
    """FOUR-2: the console shows why the approve button is refused."""
    verdict = change_approver_verdict(approver, roles, "op_a", subject)
    assert (verdict.allowed, verdict.reason) == (reason is None, reason)


def test_four2_roles_may_be_any_iterable_read_once():
    """FOUR-2: the roles can come as a one-pass iterator (built here, so a rerun of the
    test, as mutmut does, gets a fresh one)."""
    assert change_approver_verdict("op_b", iter(["reviewer", "admin"]), "op_a", None).allowed


def test_four2_the_diff_is_pretty_sorted_json_with_two_lines_of_context():
    """FOUR-2: JSON fields diff as indented, key-sorted text, non-ASCII as written."""
    before = {"b": 1, "a": [1, 2, 3, 4, 5, "é"], "z": 1}
    after = {"z": 1, "a": [1, 2, 3, 4, 5, "ü"], "b": 1}
    [change] = content_diff({"graph": before}, {"graph": after})
    assert change.lines == (
        "--- now",
        "+++ proposed",
        "@@ -6,5 +6,5 @@",
        "     4,",
        "     5,",
        '-    "é"',
        '+    "ü"',
        "   ],",
        '   "b": 1,',
    )


def test_four2_the_diff_of_new_and_retyped_fields():
    """FOUR-2: a creation lists every field as new; a value becoming JSON diffs as text."""
    roles, plain = content_diff(None, {"roles": ["admin"], "limit_amount": 1})
    assert (roles.name, roles.before, roles.after, roles.lines) == (
        "roles",
        None,
        ["admin"],
        ("--- now", "+++ proposed", "@@ -0,0 +1,3 @@", "+[", '+  "admin"', "+]"),
    )
    assert (plain.name, plain.before, plain.after, plain.lines, plain.changed) == ("limit_amount", None, 1, (), True)
    [retyped] = content_diff({"graph": "x", "other": 1}, {"graph": [1]})
    assert retyped.lines == ("--- now", "+++ proposed", "@@ -1 +1,3 @@", '-"x"', "+[", "+  1", "+]")
    [dropped] = content_diff({"graph": {"a": 1}}, {"graph": None})
    assert dropped.lines == ("--- now", "+++ proposed", "@@ -1,3 +0,0 @@", "-{", '-  "a": 1', "-}")
    [same] = content_diff({"graph": {"a": 1}}, {"graph": {"a": 1}})
    assert same.lines == () and not same.changed


@pytest.mark.parametrize(
    "url, parts, text",
    [
        (" https://A.example:8443/x ", ("https", "a.example", 8443), "https://a.example:8443"),
        ("HTTP://a.example", ("http", "a.example", 80), "http://a.example:80"),
        ("https://a.example:443", ("https", "a.example", 443), "https://a.example:443"),
        ("", ("", "", None), "://:None"),
        ("ftp://a.example", ("ftp", "a.example", None), "ftp://a.example:None"),
    ],
)
def test_sec4_an_origin_is_scheme_host_and_port(url, parts, text):
    """SEC-4: lowercase, trimmed, the scheme's default port filled in."""
    from app.domain.config_changes import origin_text

    assert origin(url) == parts
    assert origin_text(url) == text


def test_four2_keeping_a_budget_active_applies_at_once():
    assert second_admin_reasons(K.BUDGET_ACTIVE, {"active": True}, {"active": True}) == []


def test_four2_a_connection_version_without_a_destination_fails_closed():
    """FOUR-2: content that names no base URL is treated as moving the destination, never as staying."""
    proposed = {key: value for key, value in SAME_PLACE.items() if key != "base_url"}
    reasons = second_admin_reasons(K.CONNECTION_VERSION, proposed, CONNECTION_NOW)
    assert reasons == ["It moves the destination from https://api.example.com:443 to ://:None."]
