"""Who needs a second factor, and the rules of its codes (SPEC OPS-2, SEC-6).

Pure: no database, no Flask. The TOTP arithmetic itself is pyotp's
(`app.services.admin.mfa`); this module says which accounts need it,
which time steps a code may match, and what every refusal says.
"""

from __future__ import annotations

import re
from typing import Any

from app.domain.config_changes import PRIVILEGED_ROLES

# Roles whose password accounts must pass a second step (reviewers approve actions,
# admins approve changes): the same roles four-eyes guards (FOUR-2).
SECOND_FACTOR_ROLES = PRIVILEGED_ROLES
STEP_SECONDS = 30  # RFC 6238's time step
WINDOW_STEPS = 1  # a code of the step before or after is accepted too (clock drift)
RECOVERY_CODE_COUNT = 10
RECOVERY_CODE_LENGTH = 10  # characters of RECOVERY_ALPHABET, shown as two groups of 5
RECOVERY_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I lookalikes
# One message for every refused second step — wrong code, reused code, expired or
# missing pending step — so that a refusal says nothing about which it was (SEC-6);
# it still says what to do after signing out and in again within one 30 s step.
REFUSAL = (
    "The code is not right, or it was used already (each code works once: wait for the next "
    "code in your app), or the sign-in took too long. Sign in again."
)

_TOTP = re.compile(r"^\d{6}$")


def needs_second_factor(operator: Any, *, via_sso: bool = False) -> bool:
    """Whether signing this operator in needs a second step after the password (OPS-2).

    A password account needs one when its roles include reviewer or admin, or when
    its holder ever enrolled (a moderator or auditor who enrolled voluntarily cannot
    skip it later, nor fall back to a password only after an admin's reset: they
    enrol again). An account signed in through single sign-on never does here: the
    identity provider does its second factor (OPS-1 calls this with ``via_sso=True``).

    Args:
        operator: anything with ``roles`` (a set of role names),
            ``totp_confirmed_at`` (None until enrolment is confirmed) and, optionally,
            ``second_factor_required`` (True once enrolled; a reset keeps it).
        via_sso: True when the identity provider vouched for the sign-in.
    """
    if via_sso:
        return False
    return (
        bool(set(operator.roles) & SECOND_FACTOR_ROLES)
        or operator.totp_confirmed_at is not None
        or bool(getattr(operator, "second_factor_required", False))
    )


def time_step(epoch_seconds: float) -> int:
    """The RFC 6238 time step of a Unix time (seconds)."""
    return int(epoch_seconds // STEP_SECONDS)


def candidate_steps(now_step: int, last_used_step: int | None) -> list[int]:
    """The time steps a code typed now may match, oldest first: the window around
    ``now_step`` less every step at or before the last one used (a code is accepted
    once: no replay, OPS-2)."""
    steps = range(now_step - WINDOW_STEPS, now_step + WINDOW_STEPS + 1)
    return [step for step in steps if last_used_step is None or step > last_used_step]


def code_kind(text: Any) -> tuple[str, str]:
    """What a typed code looks like: ``("totp", "123456")``, ``("recovery", "ABCDEFGHJK")``
    or ``("none", "")``. Spaces and dashes are ignored, letters upper-cased."""
    if not isinstance(text, str):
        return "none", ""
    cleaned = re.sub(r"[\s-]", "", text)[:64].upper()
    if _TOTP.match(cleaned):
        return "totp", cleaned
    if len(cleaned) == RECOVERY_CODE_LENGTH and all(c in RECOVERY_ALPHABET for c in cleaned):
        return "recovery", cleaned
    return "none", ""


def show_recovery_code(code: str) -> str:
    """A recovery code as shown once: ``ABCDE-FGHJK``."""
    half = RECOVERY_CODE_LENGTH // 2
    return f"{code[:half]}-{code[half:]}"
