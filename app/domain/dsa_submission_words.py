"""A statement of reasons' submission in words (SPEC §7 DSA-3, REV-3): why the
Transparency Database refused a statement (its own field errors, as it wrote them),
and why submissions wait. Codes stay in small print beside the words."""

from __future__ import annotations

import json

# What stopped a submission run, or what the last answer meant for a statement.
SUBMISSION_WORDS: dict[str, str] = {
    "tdb_rate_limited": (
        "The Transparency Database asked to wait (too many requests); the sweep sends again after the wait."
    ),
    "tdb_unavailable": "The Transparency Database did not answer, or had trouble of its own; the sweep tries again.",
    "tdb_unauthorized": (
        "The Transparency Database refused the connection's API token; nothing is accepted until the token "
        "is corrected."
    ),
    "tdb_batch_refused": "The Transparency Database refused the request as a whole; the sweep tries again.",
    "tdb_unexpected_answer": (
        "The Transparency Database's address answered success without saying it created the statements (not "
        "the documented 201); they are sent again after a wait, and counted once."
    ),
    "tdb_existing_puid": (
        "The Transparency Database already held it (sent before; that answer was lost), so it counts as submitted."
    ),
    "egress_host_not_allowed": "The connection's base URL is not among its allowed hosts; nothing was sent.",
    "egress_url_invalid": "The connection's base URL is not valid; nothing was sent.",
    "egress_destination_forbidden": "The connection's address is a private or forbidden one; nothing was sent.",
}


def submission_words(code: str | None) -> str | None:
    """The sentence for a submission code (DSA-3).

    Args:
        code: a `SUBMISSION_WORDS` code, ``tdb_http_<status>``, or another code.

    Returns:
        One sentence, or None for no code; an unknown code reads as itself in words.
    """
    if not code:
        return None
    if code in SUBMISSION_WORDS:
        return SUBMISSION_WORDS[code]
    status = code.removeprefix("tdb_http_")
    if status != code and status.isdigit():
        return f"The Transparency Database answered HTTP {status}; the sweep tries again."
    return code.replace("_", " ").capitalize() + "."


def refusal_lines(last_error: str | None) -> list[tuple[str, str]]:
    """A dead letter's refusal as (field in words, the database's message) lines (DSA-3).

    Args:
        last_error: the statement's ``last_error``: the JSON object of the database's
            ``statement_N`` errors (``{"content_date": ["The content date field is
            required."]}``), or a code.

    Returns:
        One line per message, fields in the order the database gave them; a code or
        text that is not such an object is one line with an empty field.
    """
    if not last_error:
        return []
    try:
        errors = json.loads(last_error)
    except ValueError:
        errors = None
    if not isinstance(errors, dict):
        return [("", submission_words(last_error) or "")]
    lines = []
    for name, messages in errors.items():
        for message in messages if isinstance(messages, list) else [messages]:
            lines.append((str(name).replace("_", " "), str(message)))
    return lines
