"""An operator's team and attributes as a four-eyes change (SPEC POL-1, FOUR-4): what
the approval policies' eligibility filters read ("a lead of trust-leads"), so who may
count for a factor changes only when a second admin approves. The operator it is
about cannot approve it for themselves."""

from __future__ import annotations

from typing import Any

from app.domain.approval_settings import parse_attributes, team_problem
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.models import OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import change_key, owned
from app.services.uow import UnitOfWork, unit_of_work

CODE = "operator_attributes_invalid"


def _operator(session, installation_id: str, operator_id: Any) -> OperatorUser:
    return owned(session, OperatorUser, operator_id, installation_id, "operator_not_found", "operator")


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    operator = _operator(session, installation_id, content["operator_id"])
    return {
        "account": f"{operator.display_name} <{operator.email}>",
        "team": operator.team,
        "attributes": dict(operator.attributes or {}),
    }


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    operator = _operator(uow.session, context.installation_id, content["operator_id"])
    before = {"team": operator.team, "attributes": dict(operator.attributes or {})}
    operator.team = content["team"]
    operator.attributes = dict(content["attributes"])
    uow.audit(
        context.installation_id,
        change_key("operator-attributes-set", operator.id),
        "admin.operator_attributes_set",
        context.actor,
        "operator_user",
        operator.id,
        context.details({"email": operator.email, "from": before, "to": {k: content[k] for k in ("team", "attributes")}}),
    )
    return {"operator_id": operator.id}


def _summary(content: dict[str, Any], current: dict[str, Any] | None) -> str:
    pairs = ", ".join(f"{k}={v}" for k, v in sorted(content["attributes"].items())) or "no attributes"
    account = (current or {}).get("account", "an operator")
    return f"Team and attributes of {account}: {content['team'] or 'no team'}; {pairs}"


OPERATOR_ATTRIBUTES = ChangeType(
    kind=ChangeKind.OPERATOR_ATTRIBUTES,
    subject_type="operator_user",
    subject="operator_id",
    current=_current,
    summary=_summary,
    apply=_apply,
)


def propose_operator_attributes(
    admin: OperatorUser, operator_id: str, *, team: Any, attributes: Any
) -> PendingChange | None:
    """Propose an operator's team and attributes (POL-1), stored for a second admin (FOUR-2).

    Args:
        admin: the admin proposing it.
        operator_id: an operator of the admin's installation.
        team: one word (lowercase letters, digits, ``-``, ``_``; at most 50), or ""
            for none.
        attributes: ``key=value`` pairs, one per line or separated by commas (at most
            10; see `app.domain.approval_settings.parse_attributes`).

    Returns:
        The `PendingChange` stored, or None when they are those already.

    Raises:
        ApiError: 404 ``operator_not_found`` (also another installation's); 400
            ``operator_attributes_invalid``. Nothing is stored then.
    """
    with unit_of_work() as uow:
        operator = _operator(uow.session, admin.installation_id, operator_id)
        team = team.strip() if isinstance(team, str) else ""
        problem = team_problem(team)
        if problem:
            raise ApiError(400, CODE, problem, "team")
        pairs, problem = parse_attributes(attributes if isinstance(attributes, str) else "")
        if problem:
            raise ApiError(400, CODE, problem, "attributes")
        content = {"operator_id": operator.id, "team": team or None, "attributes": pairs}
        if (operator.team, dict(operator.attributes or {})) == (content["team"], pairs):
            return None
        outcome = submit(uow, admin, OPERATOR_ATTRIBUTES, content)
        uow.commit()
    return outcome
