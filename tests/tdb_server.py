"""A DSA Transparency Database on loopback, written from its public documentation.

Source: ``digital-services-act/transparency-database`` (snapshot of 2026-06-24):
``resources/markdown/api-documentation.md`` (API v2 since 1 July 2025, served at
``/api/v1``), ``routes/api_v1.php``, ``app/Http/Requests/StatementStoreRequest.php``,
``app/Services/GroupedSubmissionsService.php``,
``app/Http/Controllers/Api/v1/Statement*APIController.php``,
``app/Exceptions/PuidNotUnique*Exception.php`` and
``app/Providers/RouteServiceProvider.php``.

Its validation is written here again, rule by rule in the database's own terms
(Laravel's required, required_without_all, required_if/exclude_unless, in, array,
max, date_format, after_or_equal, regex), on purpose apart from the console's
`app.domain.dsa.statement_problems`: the server is the other side of the contract,
and a mistake in the console's rules must show up as a refusal here.

Documented behaviours implemented:

* token auth: ``Authorization: Bearer <token>``; none or another: ``401``
  ``{"message": "Unauthenticated."}``;
* ``POST /api/v1/statement``: one statement; ``201`` with the statement, its
  ``uuid``, ``id``, ``created_at``, ``platform_name``, ``permalink``, ``self``;
  invalid: ``422`` ``{"message", "errors": {field: [messages]}}``; a puid the
  platform used: ``422`` ``{"message": "The identifier given is not unique within
  this platform.", "errors": {"puid": [...]}, "existing": {"puid": ...}}``;
* ``POST /api/v1/statements``: ``{"statements": [...]}`` of 1 to 100 (else ``422``
  on ``statements``); any invalid statement creates none and answers ``422``
  ``{"errors": {"statement_N": {field: [messages]}}}``; then a puid used before or
  twice in the call creates none and answers ``422`` with ``errors.existing_puids``;
  else ``201`` ``{"statements": [...]}``;
* ``GET /api/v1/statement/existing-puid/<puid>``: ``302`` found / ``404``;
* the rate limit: at most `per_second` requests a second per token (200
  documented) and `per_minute` (12000), ``429`` "Limit Reached. Please do not
  overload the API" with ``Retry-After``; `force_429(n)` makes the next n
  statement requests answer 429 (tests);
* the field rules: required fields, at least one ``decision_*``, ``*_other`` with
  an OTHER value, the ground's pair of fields, enumerations of API v2, dates
  ``Y-m-d`` within their bounds, ``puid`` ≤ 500 of ``[a-zA-Z0-9-_]``.

Where the documentation and the server's code differ, the documentation is
followed (the stricter side): ``territorial_scope`` is required, and each
``end_date_*`` must be on or after ``application_date``.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from werkzeug.wrappers import Request, Response

from app.demo_platform import serve

# -- the enumerations, as app/Models/Statement.php lists them (API v2) ---------------
VISIBILITIES = {
    "DECISION_VISIBILITY_CONTENT_REMOVED", "DECISION_VISIBILITY_CONTENT_DISABLED",
    "DECISION_VISIBILITY_CONTENT_DEMOTED",
    "DECISION_VISIBILITY_CONTENT_AGE_RESTRICTED", "DECISION_VISIBILITY_CONTENT_INTERACTION_RESTRICTED",
    "DECISION_VISIBILITY_CONTENT_LABELLED", "DECISION_VISIBILITY_OTHER",
}  # fmt: skip
MONETARIES = {"DECISION_MONETARY_SUSPENSION", "DECISION_MONETARY_TERMINATION", "DECISION_MONETARY_OTHER"}
PROVISIONS = {
    "DECISION_PROVISION_PARTIAL_SUSPENSION", "DECISION_PROVISION_TOTAL_SUSPENSION",
    "DECISION_PROVISION_PARTIAL_TERMINATION", "DECISION_PROVISION_TOTAL_TERMINATION",
}  # fmt: skip
ACCOUNTS = {"DECISION_ACCOUNT_SUSPENDED", "DECISION_ACCOUNT_TERMINATED"}
ACCOUNT_TYPES = {"ACCOUNT_TYPE_BUSINESS", "ACCOUNT_TYPE_PRIVATE"}
GROUNDS = {"DECISION_GROUND_ILLEGAL_CONTENT", "DECISION_GROUND_INCOMPATIBLE_CONTENT"}
CONTENT_TYPES = {
    "CONTENT_TYPE_APP", "CONTENT_TYPE_AUDIO", "CONTENT_TYPE_IMAGE", "CONTENT_TYPE_PRODUCT",
    "CONTENT_TYPE_SYNTHETIC_MEDIA", "CONTENT_TYPE_TEXT", "CONTENT_TYPE_VIDEO", "CONTENT_TYPE_OTHER",
}  # fmt: skip
CATEGORIES = {
    "STATEMENT_CATEGORY_" + name
    for name in (
        "ANIMAL_WELFARE CONSUMER_INFORMATION CYBER_VIOLENCE CYBER_VIOLENCE_AGAINST_WOMEN "
        "DATA_PROTECTION_AND_PRIVACY_VIOLATIONS ILLEGAL_OR_HARMFUL_SPEECH INTELLECTUAL_PROPERTY_INFRINGEMENTS "
        "NEGATIVE_EFFECTS_ON_CIVIC_DISCOURSE_OR_ELECTIONS NOT_SPECIFIED_NOTICE OTHER_VIOLATION_TC PROTECTION_OF_MINORS "
        "RISK_FOR_PUBLIC_SECURITY SCAMS_AND_FRAUD SELF_HARM UNSAFE_AND_PROHIBITED_PRODUCTS VIOLENCE"
    ).split()
}
SOURCES = {"SOURCE_ARTICLE_16", "SOURCE_TRUSTED_FLAGGER", "SOURCE_TYPE_OTHER_NOTIFICATION", "SOURCE_VOLUNTARY"}
AUTOMATED_DECISIONS = {"AUTOMATED_DECISION_FULLY", "AUTOMATED_DECISION_PARTIALLY", "AUTOMATED_DECISION_NOT_AUTOMATED"}
YES_NO = {"Yes", "No"}
COUNTRIES = set("AT BE BG CY CZ DE DK EE ES FI FR GR HR HU IE IS IT LI LT LU LV MT NL NO PL PT RO SE SI SK".split())
PUID = re.compile(r"^[a-zA-Z0-9-_]+\Z")
YMD = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
DECISIONS = ("decision_visibility", "decision_monetary", "decision_provision", "decision_account")
END_DATES = (
    "end_date_account_restriction",
    "end_date_monetary_restriction",
    "end_date_service_restriction",
    "end_date_visibility_restriction",
)
LIMIT_MESSAGE = "Limit Reached. Please do not overload the API"
PUID_TAKEN = "The identifier given is not unique within this platform."
PUIDS_TAKEN = "The platform identifier(s) are not all unique within this call."


def _present(value) -> bool:
    """Laravel's `required`: not null, not an empty string, not an empty array."""
    return not (value is None or (isinstance(value, str) and value.strip() == "") or value in ([], {}))


def _words(name: str) -> str:
    return name.replace("_", " ")


def _ymd(value) -> date | None:
    if not isinstance(value, str) or not YMD.match(value):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def validate(statement) -> dict[str, list[str]]:
    """The errors the database answers for one statement (field -> messages)."""
    errors: dict[str, list[str]] = {}
    if not isinstance(statement, dict):
        return {"statement": ["The statement must be an object."]}
    s = statement

    def err(name: str, message: str) -> None:
        errors.setdefault(name, []).append(message)

    def required(name: str) -> bool:
        if not _present(s.get(name)):
            err(name, f"The {_words(name)} field is required.")
            return False
        return True

    def one_of(name: str, allowed: set, *, array: bool = False) -> None:
        value = s.get(name)
        if not _present(value):
            return
        if array:
            if not isinstance(value, list):
                err(name, f"The {_words(name)} field must be an array.")
            elif not all(isinstance(v, str) and v in allowed for v in value):
                err(name, f"The selected {_words(name)} is invalid.")
        elif not isinstance(value, str) or value not in allowed:
            err(name, f"The selected {_words(name)} is invalid.")

    def at_most(name: str, limit: int) -> None:
        value = s.get(name)
        if isinstance(value, str) and len(value) > limit:
            err(name, f"The {_words(name)} field must not be greater than {limit} characters.")

    # decision_*: required_without_all the three others, each from its list
    if not any(_present(s.get(name)) for name in DECISIONS):
        for name in DECISIONS:
            others = " / ".join(_words(o) for o in DECISIONS if o != name)
            err(name, f"The {_words(name)} field is required when none of {others} are present.")
    one_of("decision_visibility", VISIBILITIES, array=True)
    one_of("decision_monetary", MONETARIES)
    one_of("decision_provision", PROVISIONS)
    one_of("decision_account", ACCOUNTS)
    one_of("account_type", ACCOUNT_TYPES)
    visibility = s.get("decision_visibility") if isinstance(s.get("decision_visibility"), list) else []
    if "DECISION_VISIBILITY_OTHER" in visibility:
        if required("decision_visibility_other"):
            at_most("decision_visibility_other", 500)
    if s.get("decision_monetary") == "DECISION_MONETARY_OTHER":
        if required("decision_monetary_other"):
            at_most("decision_monetary_other", 500)

    if required("decision_ground"):
        one_of("decision_ground", GROUNDS)
    ground = s.get("decision_ground")
    pairs = {
        "DECISION_GROUND_ILLEGAL_CONTENT": (
            ("illegal_content_legal_ground", 500),
            ("illegal_content_explanation", 2000),
            "illegal content",
        ),
        "DECISION_GROUND_INCOMPATIBLE_CONTENT": (
            ("incompatible_content_ground", 500),
            ("incompatible_content_explanation", 2000),
            "incompatible content",
        ),
    }
    if ground in pairs:  # required_if the ground; excluded (ignored) unless it
        *fields, words = pairs[ground]
        for name, limit in fields:
            if not _present(s.get(name)):
                err(name, f"The {_words(name)} field is required when decision ground is {words}.")
            else:
                at_most(name, limit)
    if ground == "DECISION_GROUND_INCOMPATIBLE_CONTENT":
        one_of("incompatible_content_illegal", YES_NO)
    url = s.get("decision_ground_reference_url")
    if _present(url) and not (isinstance(url, str) and re.match(r"^https?://[^\s/$.?#][^\s]*\Z", url)):
        err("decision_ground_reference_url", "The decision ground reference url field must be a valid URL.")

    if required("content_type"):
        one_of("content_type", CONTENT_TYPES, array=True)
    types = s.get("content_type") if isinstance(s.get("content_type"), list) else []
    if "CONTENT_TYPE_OTHER" in types and required("content_type_other"):
        at_most("content_type_other", 500)
    if required("category"):
        one_of("category", CATEGORIES)
    one_of("category_addition", CATEGORIES, array=True)
    if required("territorial_scope"):  # documented as required
        one_of("territorial_scope", COUNTRIES, array=True)

    bounds = {"content_date": date(2000, 1, 1), "application_date": date(2020, 1, 1)}
    for name, first in bounds.items():
        if required(name):
            day = _ymd(s[name])
            if day is None:
                err(name, f"The {_words(name)} does not match the format YYYY-MM-DD.")
            elif day < first:
                err(name, f"The {_words(name)} field must be a date after or equal to {first.isoformat()}.")
            elif day > date(2038, 1, 1):
                err(name, f"The {_words(name)} field must be a date before or equal to 2038-01-01.")
    application = _ymd(s.get("application_date"))
    for name in END_DATES:
        if not _present(s.get(name)):
            continue  # blank: indefinite
        day = _ymd(s[name])
        if day is None:
            err(name, f"The end date of {_words(name.removeprefix('end_date_'))} does not match the format YYYY-MM-DD.")
        elif application is not None and day < application:  # documented
            err(name, f"The {_words(name)} field must be a date after or equal to application date.")
        elif day > date(2038, 1, 1):
            err(name, f"The {_words(name)} field must be a date before or equal to 2038-01-01.")

    if required("decision_facts"):
        at_most("decision_facts", 5000)
    if required("source_type"):
        one_of("source_type", SOURCES)
    if required("automated_detection"):
        one_of("automated_detection", YES_NO)
    if required("automated_decision"):
        one_of("automated_decision", AUTOMATED_DECISIONS)
    if required("puid"):
        puid = s["puid"]
        if not isinstance(puid, str) or len(puid) > 500:
            err("puid", "The puid field must not be greater than 500 characters.")
        elif not PUID.match(puid):
            err("puid", "The puid format is invalid.")
    return errors


@dataclass
class Call:
    """One request the server answered (for assertions)."""

    path: str
    status: int
    count: int  # statements in the request
    puids: list[str] = field(default_factory=list)


class TransparencyDatabase:
    """The server's state and its WSGI application.

    Args:
        tokens: the bearer tokens it accepts.
        per_second, per_minute: the rate limit per token (documented: 200, 12000).
        platform_name: what created statements carry.
    """

    def __init__(self, tokens=("tdb-token",), per_second: int = 200, per_minute: int = 12000,
                 platform_name: str = "The Platform") -> None:  # fmt: skip
        self.tokens = set(tokens)
        self.per_second = per_second
        self.per_minute = per_minute
        self.platform_name = platform_name
        self.statements: dict[str, dict] = {}  # puid -> created statement
        self.calls: list[Call] = []
        self._forced_429 = 0
        self._retry_after = 1
        self._seen: dict[str, deque] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.server = None
        self.url = ""

    # -- test controls --
    def force_429(self, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` statement requests answer 429 with this Retry-After."""
        with self._lock:
            self._forced_429, self._retry_after = times, retry_after

    @property
    def base_url(self) -> str:
        return self.url + "/api/v1"

    def batches(self) -> list[Call]:
        return [c for c in self.calls if c.path.endswith("/statements")]

    # -- serving --
    def start(self) -> TransparencyDatabase:
        self.server, self.url = serve(self)
        return self

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()

    def __call__(self, environ, start_response):
        request = Request(environ)
        response = self.answer(request)
        return response(environ, start_response)

    def answer(self, request: Request) -> Response:
        token = request.headers.get("Authorization", "")
        if not token.startswith("Bearer ") or token.removeprefix("Bearer ") not in self.tokens:
            return self._json({"message": "Unauthenticated."}, 401, request)
        limited = self._limited(token)
        if limited is not None:
            self._record(request, 429, [])
            return limited
        path = request.path
        if request.method == "GET" and path.startswith("/api/v1/statement/existing-puid/"):
            puid = path.rsplit("/", 1)[1]
            with self._lock:
                found = puid in self.statements
            message = "statement of reason found" if found else "statement of reason not found"
            return self._json({"message": message, "puid": puid}, 302 if found else 404, request)
        if request.method == "POST" and path == "/api/v1/statement":
            return self._store_one(request)
        if request.method == "POST" and path == "/api/v1/statements":
            return self._store_many(request)
        return self._json({"message": "Not Found"}, 404, request)

    def _limited(self, token: str) -> Response | None:
        now = time.monotonic()
        with self._lock:
            if self._forced_429 > 0:
                self._forced_429 -= 1
                return Response(LIMIT_MESSAGE, 429, {"Retry-After": str(self._retry_after)})
            seen = self._seen.setdefault(token, deque())
            while seen and seen[0] <= now - 60:
                seen.popleft()
            last_second = sum(1 for t in seen if t > now - 1)
            if last_second >= self.per_second or len(seen) >= self.per_minute:
                retry = 1 if last_second >= self.per_second else int(60 - (now - seen[0])) + 1
                headers = {"Retry-After": str(retry), "X-RateLimit-Limit": str(self.per_second),
                           "X-RateLimit-Remaining": "0"}  # fmt: skip
                return Response(LIMIT_MESSAGE, 429, headers)
            seen.append(now)
        return None

    def _body(self, request: Request):
        try:
            return json.loads(request.get_data() or b"{}")
        except ValueError:
            return {}

    def _created(self, statement: dict) -> dict:
        created_uuid = str(uuid.uuid4())
        return {
            **statement,
            "uuid": created_uuid,
            "id": next(self._ids),
            "created_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S"),
            "platform_name": self.platform_name,
            "permalink": f"{self.url}/statement/{created_uuid}",
            "self": f"{self.url}/api/v1/statement/{created_uuid}",
        }

    def _store_one(self, request: Request) -> Response:
        statement = self._body(request)
        errors = validate(statement)
        puid = statement.get("puid") if isinstance(statement, dict) else None
        if errors:
            first = next(iter(errors.values()))[0]
            more = sum(len(v) for v in errors.values()) - 1
            message = first + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "")
            self._record(request, 422, [puid])
            return self._json({"message": message, "errors": errors}, 422, request)
        with self._lock:
            if puid in self.statements:
                self.calls.append(Call(request.path, 422, 1, [puid]))
                body = {"message": PUID_TAKEN, "errors": {"puid": [PUID_TAKEN]}, "existing": {"puid": puid}}
                return self._json(body, 422, request)
            created = self.statements[puid] = self._created(statement)
            self.calls.append(Call(request.path, 201, 1, [puid]))
        return self._json(created, 201, request)

    def _store_many(self, request: Request) -> Response:
        payload = self._body(request)
        statements = payload.get("statements") if isinstance(payload, dict) else None
        if not isinstance(statements, list) or not 1 <= len(statements) <= 100:
            message = (
                "The statements field is required."
                if not statements
                else "The statements field must have between 1 and 100 items."
            )
            self._record(request, 422, [])
            return self._json({"message": message, "errors": {"statements": [message]}}, 422, request)
        puids = [s.get("puid") if isinstance(s, dict) else None for s in statements]
        errors = {f"statement_{n}": e for n, s in enumerate(statements) if (e := validate(s))}
        if errors:
            self._record(request, 422, puids)
            return self._json({"errors": errors}, 422, request)
        with self._lock:
            twice = {p for p in puids if puids.count(p) > 1}
            existing = sorted(twice | {p for p in puids if p in self.statements})
            if existing:
                self.calls.append(Call(request.path, 422, len(puids), puids))
                body = {"message": PUIDS_TAKEN, "errors": {"puid": [PUIDS_TAKEN], "existing_puids": existing}}
                return self._json(body, 422, request)
            out = []
            for statement in statements:
                created = self.statements[statement["puid"]] = self._created(statement)
                out.append(created)
            self.calls.append(Call(request.path, 201, len(puids), puids))
        return self._json({"statements": out}, 201, request)

    def _record(self, request: Request, status: int, puids: list) -> None:
        with self._lock:
            self.calls.append(Call(request.path, status, len(puids), list(puids)))

    @staticmethod
    def _json(body, status: int, request: Request) -> Response:
        return Response(json.dumps(body), status, mimetype="application/json")
