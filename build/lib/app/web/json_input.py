"""A request's JSON body, read the one way every JSON endpoint reads it (API-1)."""

from __future__ import annotations

from typing import Any

from flask import request

from app.domain.digests import DuplicateKey, decode_json, json_problem
from app.domain.errors import ApiError


def request_json() -> Any:
    """The request's body decoded as JSON, refused when it is not JSON, names a key
    twice or holds a value the console does not store.

    Raises:
        ApiError: 415 ``unsupported_media_type``; 400 ``invalid_json``.
    """
    if not request.is_json:
        raise ApiError(415, "unsupported_media_type", "Send Content-Type: application/json.")
    try:
        body = decode_json(request.get_data(cache=True))
    except DuplicateKey as error:  # one object saying two things (API-1)
        raise ApiError(400, "invalid_json", f"The body cannot be accepted: {error}.") from None
    except (ValueError, RecursionError):  # not JSON (or not UTF-8), or absurdly deep nesting
        body = None
    if body is None:
        raise ApiError(400, "invalid_json", "The body is not valid JSON.")
    problem = json_problem(body)
    if problem:
        raise ApiError(400, "invalid_json", f"The body cannot be accepted: {problem}.")
    return body
