"""The second factor's service (SPEC OPS-2): enrolment, the second step, no replay,
recovery codes each usable once, one refusal for every failure (SEC-6), an admin's
reset as a four-eyes change (FOUR-2), the seed sealed at rest (OPS-3)."""

from __future__ import annotations

import time

import pyotp
import pytest
from sqlalchemy import select, text

from app.domain.errors import ApiError
from app.domain.second_factor import REFUSAL, STEP_SECONDS
from app.extensions import db
from app.models import AuditEvent, OperatorRecoveryCode, OperatorUser
from app.services.admin import mfa as service
from app.services.admin.operators import create_operator
from app.services.admin.reviews import approve_change
from app.services.uow import Actor

from ..builders import make_operator


def _new(team, roles=("reviewer",), email="nina@example.com") -> OperatorUser:
    return create_operator(
        team.installation_id,
        email=email,
        password="a-long-enough-password",
        display_name="Nina",
        roles=list(roles),
        actor=Actor.system("test"),
    )


def _code(secret: str, step_offset: int = 0) -> str:
    return pyotp.TOTP(secret).at(time.time() + step_offset * STEP_SECONDS)


def _refusal(call) -> ApiError:
    with pytest.raises(ApiError) as refused:
        call()
    assert refused.value.status == 401 and refused.value.code == "second_factor_refused"
    assert refused.value.message == REFUSAL
    return refused.value


def _actions(operator_id: str) -> list[tuple[str, dict]]:
    db.session.rollback()
    rows = db.session.scalars(
        select(AuditEvent).where(AuditEvent.target_id == operator_id).order_by(AuditEvent.seq)
    ).all()
    return [(row.action, row.details_json) for row in rows]


def _enrolled(team, **kwargs) -> tuple[OperatorUser, str, list[str]]:
    operator = _new(team, **kwargs)
    enrolment = service.start_enrolment(operator.id)
    codes = service.confirm_enrolment(operator.id, _code(enrolment.secret, -1))
    return operator, enrolment.secret, codes


def test_ops2_enrolment_gives_an_otpauth_uri_then_ten_recovery_codes_kept_only_as_hashes(team):
    operator = _new(team)
    enrolment = service.start_enrolment(operator.id)
    assert enrolment.uri.startswith("otpauth://totp/") and enrolment.secret in enrolment.uri
    assert service.start_enrolment(operator.id).secret == enrolment.secret  # a reload shows the same seed
    wrong = "000000" if _code(enrolment.secret) != "000000" else "111111"
    _refusal(lambda: service.confirm_enrolment(operator.id, wrong))
    codes = service.confirm_enrolment(operator.id, _code(enrolment.secret))
    assert len(codes) == 10 and len(set(codes)) == 10 and all(len(code) == 11 for code in codes)
    stored = db.session.scalars(
        select(OperatorRecoveryCode.code_hash).where(OperatorRecoveryCode.operator_id == operator.id)
    ).all()
    assert len(stored) == 10 and not any(code.replace("-", "") in h for code in codes for h in stored)
    with pytest.raises(ApiError) as again:
        service.start_enrolment(operator.id)
    assert again.value.code == "second_factor_enrolled"
    actions = [action for action, _ in _actions(operator.id)]
    assert "operator.second_factor_refused" in actions and "operator.second_factor_enrolled" in actions


def test_ops2_the_seed_is_sealed_at_rest(team):
    operator, secret, _ = _enrolled(team)
    raw = db.session.execute(text("SELECT totp_secret FROM operator_users WHERE id = :id"), {"id": operator.id})
    stored = raw.scalar()
    assert stored and secret not in stored
    assert db.session.get(OperatorUser, operator.id).totp_secret == secret


def test_ops2_a_code_signs_in_once_a_replay_is_refused(team):
    operator, secret, _ = _enrolled(team)
    code = _code(secret, +1)  # the enrolment used the step before now
    assert service.verify_second_factor(operator.id, code).id == operator.id
    _refusal(lambda: service.verify_second_factor(operator.id, code))
    _refusal(lambda: service.verify_second_factor(operator.id, _code(secret)))  # an older step than the one used
    details = [details for action, details in _actions(operator.id) if action == "operator.second_factor_refused"]
    assert any('"reused"' in d for d in details) and not any(code in d for d in details)  # no codes in the audit


def test_ops2_a_recovery_code_works_once(team):
    operator, _secret, codes = _enrolled(team)
    assert service.verify_second_factor(operator.id, codes[0].lower()).id == operator.id
    _refusal(lambda: service.verify_second_factor(operator.id, codes[0]))
    assert service.recovery_codes_left(operator.id) == 9
    assert not any(codes[0] in d or codes[0].replace("-", "") in d for _, d in _actions(operator.id))


def test_ops2_wrong_reused_and_expired_are_one_refusal_after_the_same_work(team, monkeypatch):
    """SEC-6: the same message after the same work — the same round trips (by kind),
    the same constant-time comparisons and TOTP computations — whether the code was
    wrong (a TOTP code or a recovery code), used already, or the step expired."""
    from sqlalchemy import event

    operator, secret, codes = _enrolled(team)
    used = codes[0]
    service.verify_second_factor(operator.id, used)
    fresh = _code(secret, +1)
    work: list[str] = []

    def statement(_conn, _cursor, sql, *_args):
        work.append(sql.split()[0].upper())  # SELECT, UPDATE, INSERT, SAVEPOINT ...: one round trip each

    compare, at = service.hmac.compare_digest, pyotp.TOTP.at
    monkeypatch.setattr(service.hmac, "compare_digest", lambda a, b: work.append("compare") or compare(a, b))
    monkeypatch.setattr(pyotp.TOTP, "at", lambda self, *a, **k: work.append("totp") or at(self, *a, **k))
    cases = {
        "wrong totp": lambda: service.verify_second_factor(operator.id, "000000" if fresh != "000000" else "111111"),
        "wrong recovery": lambda: service.verify_second_factor(operator.id, "ZZZZZ-ZZZZZ"),
        "reused": lambda: service.verify_second_factor(operator.id, used),
        "expired": lambda: service.verify_second_factor(operator.id, fresh, step_valid=False),
        "other session": lambda: service.verify_second_factor(operator.id, fresh, session_version=99),
    }
    done = {}
    event.listen(db.engine, "before_cursor_execute", statement)
    try:
        for name, call in cases.items():
            db.session.rollback()
            work.clear()
            started = time.perf_counter()
            _refusal(call)
            done[name] = (time.perf_counter() - started, sorted(work))
    finally:
        event.remove(db.engine, "before_cursor_execute", statement)
    assert len({tuple(w) for _, w in done.values()}) == 1, {name: w for name, (_, w) in done.items()}
    assert "UPDATE" in done["wrong totp"][1]  # the one consuming UPDATE runs every time
    assert service.verify_second_factor(operator.id, fresh).id == operator.id  # the expired try used nothing


def test_ops2_regenerating_recovery_codes_needs_a_fresh_code_and_voids_the_old_ones(team):
    operator, secret, codes = _enrolled(team)
    wrong = "123456" if _code(secret, 1) != "123456" else "654321"
    _refusal(lambda: service.regenerate_recovery_codes(operator.id, wrong))
    new = service.regenerate_recovery_codes(operator.id, _code(secret, +1))
    assert len(new) == 10 and not set(new) & set(codes)
    _refusal(lambda: service.verify_second_factor(operator.id, codes[1]))
    assert service.verify_second_factor(operator.id, new[1]).id == operator.id
    assert "operator.recovery_codes_regenerated" in [a for a, _ in _actions(operator.id)]


def test_ops2_a_moderator_may_enrol_and_then_needs_it(team):
    from app.domain.second_factor import needs_second_factor

    operator = _new(team, roles=("moderator",))
    assert not needs_second_factor(operator)
    enrolment = service.start_enrolment(operator.id)
    service.confirm_enrolment(operator.id, _code(enrolment.secret))
    assert needs_second_factor(db.session.get(OperatorUser, operator.id))


def test_ops2_an_admin_reset_waits_for_a_second_admin_then_forces_a_new_enrolment(team):
    operator, secret, codes = _enrolled(team)
    admin, admin2 = make_operator(team.installation_id, "admin"), make_operator(team.installation_id, "admin2")
    pending = service.reset_second_factor(admin, operator.id)
    assert pending.reasons and "second factor" in pending.reasons[0]
    db.session.rollback()
    assert db.session.get(OperatorUser, operator.id).totp_confirmed_at is not None  # nothing yet
    version = db.session.get(OperatorUser, operator.id).session_version
    approve_change(admin2, pending.change_id, pending.digest)
    db.session.rollback()
    after = db.session.get(OperatorUser, operator.id)
    assert after.totp_confirmed_at is None and after.totp_secret is None and after.session_version == version + 1
    assert service.recovery_codes_left(operator.id) == 0
    _refusal(lambda: service.verify_second_factor(operator.id, codes[2]))
    assert "admin.operator_second_factor_reset" in [a for a, _ in _actions(operator.id)]
    assert service.start_enrolment(operator.id).secret != secret


def test_ops2_an_admin_cannot_reset_another_installations_operator(team):
    from ..builders import make_team

    other = make_team(None)
    operator = _new(team)
    with pytest.raises(ApiError) as refused:
        service.reset_second_factor(make_operator(other.installation_id, "admin"), operator.id)
    assert refused.value.status == 404


def test_ops2_a_reset_keeps_a_voluntary_second_factor_required(team):
    """OPS-2: a moderator who enrolled voluntarily is not returned to password-only by a
    reset: their next sign-in must enrol again, like a reviewer's."""
    from app.domain.second_factor import needs_second_factor

    operator, _, _ = _enrolled(team, roles=("moderator",), email="mo@example.com")
    admin, admin2 = make_operator(team.installation_id, "admin"), make_operator(team.installation_id, "admin2")
    pending = service.reset_second_factor(admin, operator.id)
    approve_change(admin2, pending.change_id, pending.digest)
    db.session.rollback()
    after = db.session.get(OperatorUser, operator.id)
    assert after.totp_confirmed_at is None and after.totp_secret is None
    assert needs_second_factor(after)
    service.confirm_enrolment(operator.id, _code(service.start_enrolment(operator.id).secret))
    assert needs_second_factor(db.session.get(OperatorUser, operator.id))


def test_ops2_a_moderator_never_enrolled_still_signs_in_with_a_password(team):
    from app.domain.second_factor import needs_second_factor

    assert not needs_second_factor(_new(team, roles=("moderator",), email="plain@example.com"))


def test_ops2_the_one_refusal_says_to_wait_for_the_next_code_and_the_docs_quote_it():
    """SEC-6 keeps one refusal for every case; it still tells the operator who signed out
    and back in within 30 s what to do (a code is accepted once, OPS-2)."""
    from pathlib import Path

    assert "used already" in REFUSAL and "wait for the next code" in REFUSAL
    doc = (Path(__file__).resolve().parents[2] / "docs" / "second-factor.md").read_text()
    assert REFUSAL in " ".join(doc.split())
