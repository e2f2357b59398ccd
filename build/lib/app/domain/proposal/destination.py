"""Where an action goes and how its answer is read, as the reviewer approves it (SPEC FOUR-5).

At prepare, `describe` turns the component version's kind and reference and the
connection version's base URL into a plain ``delivery`` description: the method, the
destination origin (scheme, host, port) and the resolved request path, the platform
kind, how the answer is read (REST: status key -> outcome; the receipt contract; PDS:
the operation) and what is read back. The proposal's digest covers it (ID-2) and the
proposal stores it. Before every delivery attempt it is described again from what is
in force; when the two differ nothing is sent (`action_delivery_changed`).

`in_words` says it for people: "Sends POST https://platform.example:443/v1/... · REST ·
a 2xx answer means applied, 4xx failed, 5xx retried".

Everything here is pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.domain.errors import ActionError
from app.domain.platform_kinds import (
    PDS_KIND,
    REST_KIND,
    STATUS_PATH,
    UPDATE_PATH,
    fill_path,
    parse_pds_reference,
    parse_rest_reference,
)

DELIVERY_CHANGED = "action_delivery_changed"
DEFAULT_PORTS = {"http": 80, "https": 443}

# DLV-2, SEC-3: "[POST|PUT|PATCH|DELETE] /path"; the method defaults to POST. The path
# keeps to URL path characters, never climbs out of the connection's base path ("..")
# and has no empty segment ("//", which reads as the start of another host).
OPERATION_PATTERN = re.compile(
    r"^(?:(POST|PUT|PATCH|DELETE)\s+)?(?!\S*(?://|/\.\.(?:/|$)|%2[eE]))(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)$"
)
KIND_NAMES = {"webhook": "webhook", "external_api": "external API", REST_KIND: "REST", PDS_KIND: "AT Protocol PDS"}
# What a status without a declared key means (egress's HTTP classes, PLAT-3).
DEFAULT_MEANING = {"4xx": "failed", "5xx": "retried"}
LITERAL = re.compile(r"""^\s*(?:'(applied|accepted|failed)'|`"(applied|accepted|failed)"`)\s*$""")


@dataclass(frozen=True)
class Operation:
    method: str
    path: str


def parse_operation(reference: str) -> Operation:
    """Parse a webhook or external API reference such as ``POST /actions/takedown``:
    a method and a path under the connection's base URL.

    Raises:
        ActionError: ``action_component_operation_invalid`` (DLV-2, SEC-3).
    """
    match = OPERATION_PATTERN.match((reference or "").strip())
    if not match:
        raise ActionError("action_component_operation_invalid")
    return Operation(method=match.group(1) or "POST", path=match.group(2))


@dataclass(frozen=True)
class Destination:
    """What is in force for a delivery, as plain values: the component version's
    implementation kind and reference, and its connection version's base URL."""

    kind: str
    reference: str
    base_url: str


def origin_of(base_url: str) -> str:
    """``scheme://host:port`` of a URL, the port always written (443 for https); a
    port that cannot be read is left out (nothing can be sent there)."""
    parts = urlsplit(base_url or "")
    try:
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # out of range or not a number
        port = None
    return _url(parts.scheme, parts.hostname or "", port)


def _port(parts) -> int | None:
    try:
        return parts.port
    except ValueError:  # out of range or not a number
        return None


def _url(scheme: str, host: str, port: Any, path: str = "") -> str:
    """A URL as it is written: an IPv6 host in brackets, the port when there is one."""
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}{f':{port}' if port else ''}{path}"


def _path(base_url: str, path: str, fields: dict[str, Any]) -> str:
    """The request path as egress builds it: the filled path under the base URL's path.
    A placeholder without a value stays as written (delivery refuses it before sending)."""
    try:
        path = fill_path(path, fields)
    except ActionError:
        pass
    return urlsplit(base_url or "").path.rstrip("/") + path


def describe(destination: Destination, fields: dict[str, Any]) -> dict[str, Any]:
    """The delivery a reviewer approves, as a JSON-compatible dict (FOUR-5, ID-2).

    Args:
        destination: the component version's kind and reference and the connection
            version's base URL, as in force.
        fields: the action's fields the request path may name: ``action_id``,
            ``operation_id``, ``target`` (`delivery_fields`).

    Returns:
        ``{"kind", "method", "origin", "path", "answer", ...}``: ``answer`` is
        ``receipt`` (the receipt contract), a REST kind's ``outcome`` map (status key
        -> JMESPath) with its ``read_back`` (or None), or a PDS ``operation`` with the
        ``read_back`` it confirms by. A reference that does not parse is described as
        ``{"kind", "origin", "invalid": code}`` (delivery refuses it before sending).
        Never raises.
    """
    kind, base = destination.kind, destination.base_url
    described: dict[str, Any] = {"kind": kind, "origin": origin_of(base)}
    try:
        if kind == REST_KIND:
            rest = parse_rest_reference(destination.reference)
            read_back = None
            if rest.read_back is not None:
                read_back = {
                    "method": rest.read_back.method,
                    "path": _path(base, rest.read_back.path, fields),
                    "value": rest.read_back.value,
                    "expected": rest.read_back.expected,
                }
            described |= {
                "method": rest.method,
                "path": _path(base, rest.path, fields),
                "answer": "outcome",
                "outcome": dict(sorted(rest.outcome.items())),
                "read_back": read_back,
            }
        elif kind == PDS_KIND:
            pds = parse_pds_reference(destination.reference)
            described |= {
                "method": "POST",
                "path": _path(base, UPDATE_PATH, fields),
                "answer": "read_back",
                "operation": f"{'takedown' if pds.applied else 'reversal'} {pds.subject_kind}",
                "read_back": {"method": "GET", "path": _path(base, STATUS_PATH, fields)},
            }
        else:
            operation = parse_operation(destination.reference)
            described |= {"method": operation.method, "path": _path(base, operation.path, fields), "answer": "receipt"}
    except ActionError as error:
        described["invalid"] = error.code
    return described


def delivery_fields(action_id: str, operation_id: str, target: dict[str, Any]) -> dict[str, Any]:
    """The action's fields a request path may name (PLAT-3 placeholders)."""
    return {"action_id": action_id, "operation_id": operation_id, "target": target}


def check_unchanged(approved: dict[str, Any] | None, current: dict[str, Any]) -> None:
    """Refuse a delivery whose destination or reading changed since it was approved (FOUR-5).

    Args:
        approved: the description the proposal stores (None for a proposal prepared
            before FOUR-5: nothing to compare, it is not checked).
        current: `describe` of what is in force now.

    Raises:
        DeliveryChanged: ``action_delivery_changed`` (terminal), naming both.
    """
    if approved is not None and approved != current:
        raise DeliveryChanged(approved, current)


class DeliveryChanged(ActionError):
    """The delivery in force is not the one approved: nothing is sent (FOUR-5)."""

    def __init__(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        super().__init__(DELIVERY_CHANGED)
        self.before = before
        self.after = after


# --- in words (FOUR-5) ------------------------------------------------------------


def _meaning(expression: str) -> str:
    match = LITERAL.match(expression or "")
    if match:
        return match.group(1) or match.group(2)
    return f"what {expression} gives"


def outcome_words(outcome: dict[str, str]) -> list[str]:
    """How a REST answer is read, per status key, then the classes left to their HTTP
    meaning: ``["a 2xx answer means applied", "4xx failed", "5xx retried"]``."""
    parts = [f"{key} {_meaning(expression)}" for key, expression in sorted(outcome.items())]
    for key in ("4xx", "5xx"):  # a class without its own key keeps its HTTP meaning
        if key not in outcome:
            parts.append(f"{key} {DEFAULT_MEANING[key]}")
    if parts:
        parts[0] = f"a {parts[0].split(' ', 1)[0]} answer means {parts[0].split(' ', 1)[1]}"
    return parts


def warnings_of(delivery: dict[str, Any]) -> list[str]:
    """What a reviewer should look at twice (FOUR-5): an error status read as applied or
    accepted, or read by an expression; a component that cannot be sent as configured."""
    found = []
    for key, expression in sorted((delivery.get("outcome") or {}).items()):
        meaning = _meaning(expression)
        if key.startswith("2"):
            continue
        if meaning in ("applied", "accepted"):
            found.append(f"a {key} answer (an error) is read as {meaning}")
        elif meaning.startswith("what "):
            found.append(f"a {key} answer (an error) is read by an expression that may give applied")
    if delivery.get("invalid"):
        found.append(f"the component cannot be sent as configured ({delivery['invalid']})")
    return found


@dataclass(frozen=True)
class DeliveryWords:
    """A delivery description for people; ``host`` is shown prominently."""

    method: str
    scheme: str
    host: str
    port: str
    path: str
    kind: str
    reading: str
    warnings: tuple[str, ...]

    @property
    def url(self) -> str:
        return _url(self.scheme, self.host, self.port, self.path)

    @property
    def written_host(self) -> str:
        """The host as the URL writes it (an IPv6 address in brackets)."""
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def text(self) -> str:
        return f"Sends {self.method} {self.url} · {self.kind} · {self.reading}".replace("  ", " ")


def in_words(delivery: dict[str, Any] | None) -> DeliveryWords | None:
    """`describe`'s result said in words (FOUR-5): "Sends POST https://platform.example:443
    /v1/takedowns/post%3A1001 · REST · a 2xx answer means applied, 4xx failed, 5xx retried".

    Returns:
        None for a proposal prepared before FOUR-5 (no stored description).
    """
    if not delivery:
        return None
    origin = urlsplit(delivery.get("origin") or "")
    kind = delivery.get("kind", "")
    if delivery.get("invalid"):
        reading = f"cannot be sent as configured ({delivery['invalid']})"
    elif kind == REST_KIND:
        reading = ", ".join(outcome_words(delivery.get("outcome") or {}))
        read_back = delivery.get("read_back")
        if read_back:
            expected = json.dumps(read_back.get("expected"))
            reading += (
                f"; then reads back {read_back['method']} {read_back['path']}"
                f" and counts it applied only when {read_back['value']} is {expected}"
            )
    elif kind == PDS_KIND:
        reading = (
            f"{delivery.get('operation')}; applied only when {delivery['read_back']['method']} "
            f"{delivery['read_back']['path']} reads back the takedown state with this action's reference"
        )
    else:
        reading = "the platform's signed receipt says applied, accepted or failed; 4xx failed, 5xx retried"
    return DeliveryWords(
        method=delivery.get("method", ""),
        scheme=origin.scheme,
        host=origin.hostname or "",
        port=str(_port(origin) or ""),
        path=delivery.get("path", ""),
        kind=KIND_NAMES.get(kind, kind),
        reading=reading,
        warnings=tuple(warnings_of(delivery)),
    )


def host_of(delivery: dict[str, Any] | None) -> str | None:
    """The destination host alone, for the approval task list (FOUR-5)."""
    if not delivery:
        return None
    return urlsplit(delivery.get("origin") or "").hostname
