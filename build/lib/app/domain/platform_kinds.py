"""How the console reads platforms that do not answer with its receipts (SPEC PLAT-1..3).

Two implementation kinds besides the receipt contract (``webhook`` / ``external_api``):

* ``atproto_pds``: an AT Protocol PDS's admin API. The reference names the operation
  and the subject kind, e.g. ``takedown record`` or ``reversal account``. The update is
  ``com.atproto.admin.updateSubjectStatus`` with the operation id as the takedown
  reference; ``com.atproto.admin.getSubjectStatus`` confirms it (PLAT-1, PLAT-2).
* ``rest``: a REST API answering in its own shape. The reference is a JSON object: the
  update request, an optional body mapping, status classes with JMESPath over the
  response body giving ``applied`` / ``accepted`` / ``failed``, and an optional
  read-back request with the value it must show (PLAT-3).

Everything here is pure: parsing and checking references, building request bodies
and reading answers. The service (``app.services.lifecycle.platforms``) sends.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import jmespath
from jmespath.exceptions import JMESPathError

from .errors import ActionError
from .expressions import expression_problem

PDS_KIND = "atproto_pds"
REST_KIND = "rest"
PLATFORM_KINDS = (PDS_KIND, REST_KIND)
OUTCOMES = ("applied", "accepted", "failed")

SUBJECT_NOT_FOUND = "platform_subject_not_found"
AUTH_FAILED = "platform_auth_failed"
READ_BACK_DISAGREES = "platform_read_back_disagrees"
SUBJECT_INVALID = "platform_subject_invalid"
OUTCOME_UNREADABLE = "platform_outcome_unreadable"
PLATFORM_REFUSED = "platform_refused"
READ_BACK_DELAY_SECONDS = 5

# --- AT Protocol PDS (PLAT-1, PLAT-2) --------------------------------------------------

UPDATE_PATH = "/xrpc/com.atproto.admin.updateSubjectStatus"
STATUS_PATH = "/xrpc/com.atproto.admin.getSubjectStatus"
RECORD_REF = "com.atproto.repo.strongRef"
ACCOUNT_REF = "com.atproto.admin.defs#repoRef"
# XRPC error names a PDS gives for a subject it does not hold.
NOT_FOUND_ERRORS = frozenset({"NotFound", "RecordNotFound", "RepoNotFound", "AccountNotFound"})
PDS_ACCOUNT, PDS_RECORD = "account", "record"  # the two kinds of PDS subject (PdsOperation.subject_kind)
PDS_REFERENCE = re.compile(rf"^(takedown|reversal)\s+({PDS_ACCOUNT}|{PDS_RECORD})$")
DID = re.compile(r"^did:[a-z]+:[A-Za-z0-9._:%-]{1,2000}$")
AT_URI = re.compile(r"^at://(did:[a-z]+:[A-Za-z0-9._:%-]+)/([A-Za-z0-9.-]{1,317})/([A-Za-z0-9._~:-]{1,512})$")
CID = re.compile(r"^[A-Za-z0-9+/=_-]{8,200}$")


@dataclass(frozen=True)
class PdsOperation:
    """A PDS component's reference: take down (``applied``) or reverse, an account or a record."""

    applied: bool
    subject_kind: str  # account | record


def parse_pds_reference(reference: Any) -> PdsOperation:
    """Parse ``takedown account``, ``takedown record``, ``reversal account`` or
    ``reversal record`` (PLAT-1).

    Raises:
        ActionError: ``action_component_operation_invalid``.
    """
    match = PDS_REFERENCE.match(reference.strip()) if isinstance(reference, str) else None
    if not match:
        raise ActionError("action_component_operation_invalid")
    return PdsOperation(applied=match.group(1) == "takedown", subject_kind=match.group(2))


def pds_subject(operation: PdsOperation, target: Any) -> dict[str, str]:
    """The admin API subject of a proposal's target (PLAT-1).

    An account is named by a DID, or by any at-uri in its repository (a reported
    post's author is the repository's DID). A record is named by its at-uri; its CID
    comes from the target's ``cid`` when the mapping gives one, else from the PDS
    itself before the update (see `needs_lookup`).

    Args:
        operation: from `parse_pds_reference`.
        target: the proposal's target, ``{"reference": ..., "cid"?: ...}``.

    Returns:
        ``{"$type": repoRef, "did"}`` or ``{"$type": strongRef, "uri", "cid"?}``.

    Raises:
        ActionError: ``platform_subject_invalid`` (terminal) for a reference of the wrong shape.
    """
    reference = target.get("reference") if isinstance(target, dict) else None
    if not isinstance(reference, str):
        raise ActionError(SUBJECT_INVALID)
    uri = AT_URI.match(reference)
    if operation.subject_kind == PDS_ACCOUNT:
        did = uri.group(1) if uri else reference
        if not DID.match(did):
            raise ActionError(SUBJECT_INVALID)
        return {"$type": ACCOUNT_REF, "did": did}
    if not uri:
        raise ActionError(SUBJECT_INVALID)
    subject = {"$type": RECORD_REF, "uri": reference}
    cid = target.get("cid")
    if cid is not None:
        if not isinstance(cid, str) or not CID.match(cid):
            raise ActionError(SUBJECT_INVALID)
        subject["cid"] = cid
    return subject


def needs_lookup(subject: dict[str, str]) -> bool:
    """Whether the subject lacks what the update needs (a record's CID): the PDS is
    asked first (getSubjectStatus answers the record's strong reference)."""
    return subject["$type"] == RECORD_REF and "cid" not in subject


def pds_status_query(subject: dict[str, str]) -> str:
    """The getSubjectStatus query string for a subject (``uri=`` or ``did=``)."""
    if subject["$type"] == RECORD_REF:
        return "uri=" + quote(subject["uri"], safe="")
    return "did=" + quote(subject["did"], safe="")


def pds_update_body(subject: dict[str, str], operation: PdsOperation, operation_id: str) -> dict[str, Any]:
    """The updateSubjectStatus body: the subject and the takedown state, with the
    operation id as its reference (PLAT-1). Setting a state is idempotent: the same
    body sent twice leaves one takedown with one reference."""
    return {"subject": subject, "takedown": {"applied": operation.applied, "ref": operation_id}}


def pds_subject_from_status(subject: dict[str, str], answer: Any) -> dict[str, str]:
    """The subject completed from a getSubjectStatus answer (the record's CID).

    Raises:
        ActionError: ``platform_subject_not_found`` when the answer names no usable subject.
    """
    named = answer.get("subject") if isinstance(answer, dict) else None
    if subject["$type"] == RECORD_REF:
        cid = named.get("cid") if isinstance(named, dict) and named.get("uri") == subject["uri"] else None
        if not isinstance(cid, str) or not CID.match(cid):
            raise ActionError(SUBJECT_NOT_FOUND)
        return {**subject, "cid": cid}
    return subject


def pds_read_back_agrees(answer: Any, operation: PdsOperation, operation_id: str) -> bool:
    """Whether getSubjectStatus shows the intended state (PLAT-2).

    A takedown agrees when ``takedown.applied`` is true with our reference; a reversal
    when no takedown is applied (the PDS keeps no reference for a reversal).

    Args:
        answer: the decoded getSubjectStatus body.
        operation: what the component does.
        operation_id: the proposal's operation id (the takedown reference).
    """
    takedown = answer.get("takedown") if isinstance(answer, dict) else None
    if not isinstance(takedown, dict):
        return not operation.applied and isinstance(answer, dict) and "subject" in answer
    if operation.applied:
        return takedown.get("applied") is True and takedown.get("ref") == operation_id
    applied = takedown.get("applied")
    return applied is None or applied is False  # "true", 1: not plainly off, the takedown may hold


def pds_error(status: int | None, body: Any) -> ActionError | None:
    """The terminal error a PDS answer means, or None to keep the HTTP class's (PLAT-2).

    401 (a wrong or missing admin password) is ``platform_auth_failed``; a 400 whose
    XRPC error says the subject is unknown is ``platform_subject_not_found``.
    """
    if status == 401:
        return ActionError(AUTH_FAILED)
    error = body.get("error") if isinstance(body, dict) else None
    if status == 400 and error in NOT_FOUND_ERRORS:
        return ActionError(SUBJECT_NOT_FOUND)
    return None


# --- REST APIs in their own shape (PLAT-3) ---------------------------------------------

STATUS_KEY = re.compile(r"^(?:[1-5]xx|[1-5][0-9]{2})$")
METHODS = ("POST", "PUT", "PATCH", "DELETE")
READ_METHODS = ("GET", "POST")
REQUEST_PATTERN = re.compile(r"^([A-Z]+)\s+(/\S*)$")
PLACEHOLDER = re.compile(r"\{([a-z_]+(?:\.[a-z_]+)?)\}")
PLACEHOLDERS = ("operation_id", "action_id", "target.reference", "target.kind")
REST_KEYS = {"request", "body", "outcome", "read_back"}
READ_BACK_KEYS = {"request", "value", "expected"}


@dataclass(frozen=True)
class ReadBack:
    method: str
    path: str  # a template: {operation_id}, {action_id}, {target.reference}, {target.kind}
    value: str  # JMESPath over the read-back's body
    expected: Any  # what it must equal


@dataclass(frozen=True)
class RestOperation:
    """A REST component's reference, parsed (PLAT-3)."""

    method: str
    path: str
    body: str | None  # JMESPath over the action's fields; None sends the standard body
    outcome: dict[str, str]  # status key ("2xx", "409") -> JMESPath giving an outcome
    read_back: ReadBack | None


def _request_problems(name: str, value: Any, methods: tuple[str, ...]) -> list[str]:
    match = REQUEST_PATTERN.match(value.strip()) if isinstance(value, str) else None
    if not match or match.group(1) not in methods:
        return [f"{name} must be a method ({', '.join(methods)}) and a path, e.g. {methods[0]} /moderation/removals"]
    path = match.group(2)
    if "//" in path or "/../" in path + "/" or "%2e" in path.lower() or "?" in path or "#" in path:
        return [f"{name}: the path stays under the connection's base URL (no '//', '..', query or fragment)"]
    unknown = sorted(set(PLACEHOLDER.findall(path)) - set(PLACEHOLDERS))
    if unknown:
        return [f"{name}: unknown placeholder(s) {', '.join(unknown)} (use {', '.join(PLACEHOLDERS)})"]
    return []


def rest_reference_problems(text: Any) -> list[str]:
    """Why a REST reference cannot be saved (PLAT-3, SEC-5), as sentences; [] when it can.

    The reference is a JSON object::

        {"request": "POST /moderation/removals",
         "body": "{post: target.reference, reason: payload.reason_code}",      (optional)
         "outcome": {"2xx": "state == 'done' && 'applied' || 'accepted'", "404": "'failed'"},
         "read_back": {"request": "GET /posts/{target.reference}/moderation",  (optional)
                       "value": "state", "expected": "removed"}}

    Status keys are a class (``2xx``) or a code (``409``); the code wins over its
    class. Each value is JMESPath over the response body that must give ``applied``,
    ``accepted`` or ``failed``; a status with no key keeps its HTTP meaning (5xx,
    408, 429 retry; other 4xx fail). At least one 2xx key is required.
    """
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError as error:
        return [f"the reference is not JSON ({error.msg} at character {error.pos})"]
    if not isinstance(value, dict):
        return ['the reference must be a JSON object with "request" and "outcome"']
    problems = []
    unknown = sorted(set(value) - REST_KEYS)
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)} (use {', '.join(sorted(REST_KEYS))})")
    problems += _request_problems("request", value.get("request"), METHODS)
    if "body" in value and (why := expression_problem(value["body"])):
        problems.append(f"body {why}")
    outcome = value.get("outcome")
    if not isinstance(outcome, dict) or not outcome:
        problems.append('outcome must map status classes ("2xx") or codes ("409") to JMESPath expressions')
    else:
        for key, expression in outcome.items():
            if not STATUS_KEY.match(str(key)):
                problems.append(f"outcome key {key!r} is not a status class like 2xx or a code like 409")
            elif why := expression_problem(expression):
                problems.append(f"outcome {key} {why}")
        if not any(str(key).startswith("2") for key in outcome):
            problems.append("outcome needs a 2xx key (or a 2xx code): how a success is read")
    read_back = value.get("read_back")
    if read_back is not None:
        if not isinstance(read_back, dict):
            problems.append('read_back must be an object with "request", "value" and "expected"')
        else:
            unknown = sorted(set(read_back) - READ_BACK_KEYS)
            if unknown or not set(read_back) >= READ_BACK_KEYS:
                problems.append('read_back needs exactly "request", "value" and "expected"')
            problems += _request_problems("read_back.request", read_back.get("request"), READ_METHODS)
            if why := expression_problem(read_back.get("value")):
                problems.append(f"read_back.value {why}")
    return problems


def parse_rest_reference(text: Any) -> RestOperation:
    """Parse a REST reference (see `rest_reference_problems`).

    Raises:
        ActionError: ``action_component_operation_invalid`` when it has problems.
    """
    if rest_reference_problems(text):
        raise ActionError("action_component_operation_invalid")
    value = json.loads(text)
    method, path = value["request"].split()
    read_back = value.get("read_back")
    if read_back is not None:
        rb_method, rb_path = read_back["request"].split()
        read_back = ReadBack(rb_method, rb_path, read_back["value"], read_back["expected"])
    return RestOperation(method, path, value.get("body"), dict(value["outcome"]), read_back)


def fill_path(template: str, fields: dict[str, Any]) -> str:
    """A path template with its placeholders filled, each value percent-encoded as one
    path segment (a reference such as ``post:1`` or an at-uri cannot add segments).
    A value made only of dots (``.``, ``..``) has its dots encoded too (``%2E%2E``):
    the HTTP client would otherwise resolve it as a dot segment and walk the path
    (SPEC FOUR-10).

    Args:
        template: e.g. ``/posts/{target.reference}/moderation``.
        fields: the action's fields (``operation_id``, ``action_id``, ``target``...).

    Raises:
        ActionError: ``platform_subject_invalid`` when a placeholder has no text value.
    """

    def value_of(match: re.Match) -> str:
        name = match.group(1)
        value = fields
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if not isinstance(value, str) or not value:
            raise ActionError(SUBJECT_INVALID)
        if value.strip(".") == "":  # a dot segment: requests would remove it and the one before
            return "%2E" * len(value)
        return quote(value, safe="")

    return PLACEHOLDER.sub(value_of, template)


def rest_body(operation: RestOperation, fields: dict[str, Any], standard: dict[str, Any]) -> Any:
    """The update's body: the body mapping over the action's fields, or the standard body.

    Raises:
        ActionError: ``action_configuration_invalid`` when the mapping does not evaluate.
    """
    if operation.body is None:
        return standard
    return _search(operation.body, fields, "action_configuration_invalid")


def _search(expression: str, value: Any, code: str, retryable: bool = False) -> Any:
    if expression_problem(expression) is not None:  # the limits hold before every run (SEC-5)
        raise ActionError(code, retryable)
    try:
        return jmespath.search(expression, value)
    except JMESPathError as error:
        raise ActionError(code, retryable) from error


def outcome_expression(operation: RestOperation, status: int) -> str | None:
    """The outcome expression declared for an HTTP status: its code's, else its class's."""
    return operation.outcome.get(str(status)) or operation.outcome.get(f"{status // 100}xx")


def rest_outcome(operation: RestOperation, status: int, body: bytes) -> str | None:
    """Read the update's outcome from the answer (PLAT-3).

    Args:
        operation: the parsed reference.
        status: the HTTP status.
        body: the raw response body (JSON, or empty).

    Returns:
        ``applied``, ``accepted`` or ``failed``; None when no key covers the status
        (the HTTP class decides: retry 5xx/408/429, fail other 4xx).

    Raises:
        ActionError: ``platform_outcome_unreadable`` (retryable) when the declared
            expression gives anything but the three outcomes or fails on the body
            (a type error), or the body is not JSON.
    """
    expression = outcome_expression(operation, status)
    if expression is None:
        return None
    value = _json_or_none(body)
    outcome = _search(expression, value, OUTCOME_UNREADABLE, True)
    if outcome not in OUTCOMES:
        raise ActionError(OUTCOME_UNREADABLE, True)
    return outcome


def rest_read_back_agrees(read_back: ReadBack, body: bytes) -> bool:
    """Whether the read-back's answer shows the expected value (PLAT-3)."""
    try:
        return _search(read_back.value, _json_or_none(body), OUTCOME_UNREADABLE) == read_back.expected
    except ActionError:
        return False


def _json_or_none(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:  # not JSON, or nested too deep to decode
        raise ActionError(OUTCOME_UNREADABLE, True) from error


def read_back_disagrees() -> ActionError:
    """A read-back that does not show the intended state: retryable (PLAT-2); the next
    attempt reads back first and resends only when it still disagrees."""
    return ActionError(READ_BACK_DISAGREES, True, READ_BACK_DELAY_SECONDS)


def observed_receipt_fields(action_id: str, operation_id: str, payload_digest: str, observed_by: str) -> dict:
    """The receipt the console writes for an outcome it observed itself (PLAT-2): the
    proposal's identity, ``applied``, and which read-back saw it (as the provider
    request id, so the receipt shows where it came from)."""
    return {
        "action_id": action_id,
        "operation_id": operation_id,
        "payload_digest": payload_digest,
        "status": "applied",
        "provider_request_id": f"observed:{observed_by}"[:500],
    }
