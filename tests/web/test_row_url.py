"""`row_url`, the list rows' cheap `url_for` (issue 25 speed): the same text as
`url_for` for every value, quoted by the rule's own converter."""

from __future__ import annotations

import pytest
from flask import url_for

from app.web.templating import row_url

VALUES = ["run_1:takedown:main:proposal", "a b/c?d#e%f&g", "ünï<code>\"'", "", "QQrowQQ"]


@pytest.mark.parametrize(
    "endpoint,name",
    [("console.proposal", "proposal_id"), ("console.claim", "task_id"), ("console.report", "report_id"),
     ("console.queue_subject", "subject_id")],
)
def test_row_url_is_url_for(app, endpoint, name):
    with app.test_request_context("/", base_url="http://console.example/sub"):
        for value in VALUES:
            if value == "":
                continue  # no rule matches an empty id
            assert row_url(endpoint, name, value) == url_for(endpoint, **{name: value})


def test_a_value_outside_the_rule_falls_back_to_url_for(app):
    with app.test_request_context("/"):
        assert row_url("console.proposals", "after", "x y") == url_for("console.proposals", after="x y")
