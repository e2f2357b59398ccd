"""Bare HTTP errors are named from Werkzeug's status table, not one of our own."""

from __future__ import annotations

import pytest

from app.web.errors import http_error_code


@pytest.mark.parametrize(
    "status, code",
    [
        (400, "bad_request"),
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "not_found"),
        (405, "method_not_allowed"),
        (409, "conflict"),
        (413, "request_too_large"),  # the name the OpenAPI document publishes
        (415, "unsupported_media_type"),
        (418, "i_m_a_teapot"),
        (429, "too_many_requests"),
        (431, "request_header_fields_too_large"),
        (599, "http_error"),
        (None, "http_error"),
    ],
)
def test_an_http_error_is_named_after_its_reason_phrase(status, code):
    assert http_error_code(status) == code


def test_a_bare_404_and_405_answer_json_to_the_api(app, client):
    assert client.get("/api/v1/no-such-thing").get_json()["error"]["code"] == "not_found"
    assert client.delete("/api/v1/reports").get_json()["error"]["code"] == "method_not_allowed"


def test_a_body_over_the_limit_is_request_too_large(app, client):
    response = client.post("/api/v1/reports", data=b"x" * (app.config["MAX_CONTENT_LENGTH"] + 1))
    assert response.status_code == 413 and response.get_json()["error"]["code"] == "request_too_large"
