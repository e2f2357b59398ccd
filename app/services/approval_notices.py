"""Who waits to approve what, and the notices that tell them (SPEC POL-7).

`eligible` is the one rule: an active operator admitted by some factor of a
proposal's recorded policies (`policies_of(approval_route)`), not one of its makers
(FOUR-1), without a counting vote of their own (bound to the current payload digest,
not expired: POL-2). `eligible_approvers` applies it to every operator of the
installation for one proposal (the notices); `app.services.approval_inbox` applies
it to one operator over the open proposals (the inbox and the navigation's count).

Notices go through the `ApprovalNotice` outbox, created in the transaction that
opens the proposal's approval (`queue_notices`, from `open_approval_task`), unique per
subject, person and channel (at most once per proposal per person). A job enqueued
after commit, and the periodic sweep, send what is pending (`send_pending_notices`):
e-mail over SMTP, and a Standard Webhooks-signed JSON POST through the egress rules.
A notice carries the subject's reference, the action in words and a link — never
evidence text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import smtplib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage

from flask import current_app
from sqlalchemy import func, select, update

from app.domain import approval_policy as pol
from app.domain.clock import utcnow
from app.domain.labels import label_for
from app.domain.subject_names import name_subject
from app.extensions import db
from app.models import ActionProposal, ApprovalNotice, ApprovalVote, OperatorUser, predicates
from app.services.uow import UnitOfWork, unit_of_work

log = logging.getLogger(__name__)
P = ActionProposal

EMAIL, WEBHOOK = "email", "webhook"
MAX_ATTEMPTS = 5  # then the notice is `failed` with its last error
BACKOFF_SECONDS = 30  # 30 s, 60 s, 120 s, 240 s between attempts
LEASE_SECONDS = 300  # a sender holds a claimed notice this long
WEBHOOK_TIMEOUT_SECONDS = 10
SEND_BATCH = 100
NOTICE_JOB = "app.jobs.send_notices_job"


# -- who is eligible ---------------------------------------------------------------------


def approver_of(operator: OperatorUser) -> pol.Approver:
    """The domain's view of an operator: roles, team and admin-set attributes (POL-1)."""
    return pol.Approver(operator.id, frozenset(operator.roles), operator.team, dict(operator.attributes or {}))


def admitted(approver: pol.Approver, approval_route: dict | None) -> bool:
    """Whether some factor of a proposal's recorded policies admits `approver` (POL-1)."""
    return admits_by(approver, pol.policies_of(approval_route))


def admits_by(approver: pol.Approver, policies: tuple[pol.Policy, ...]) -> bool:
    """Whether some factor of `policies` admits `approver` (POL-1)."""
    return any(f.eligibility.admits(approver) for p in policies for f in p.factors)


def eligible(operator: OperatorUser, approval_route: dict | None, makers: Iterable[str], voted: Iterable[str]) -> bool:
    """The rule (POL-7): `operator` is active, admitted by some factor of the recorded
    policies (`approval_route`), not among `makers` (FOUR-1) and not among `voted`
    (ids with a counting vote on the proposal, POL-2)."""
    return (
        bool(operator.active)
        and operator.id not in set(makers)
        and operator.id not in set(voted)
        and admitted(approver_of(operator), approval_route)
    )


def counting_voters(session, proposal: ActionProposal, now: datetime | None = None) -> set[str]:
    """Ids of operators whose vote on `proposal` still counts: bound to its current
    payload digest and not expired (POL-2)."""
    now = now or utcnow()
    return set(
        session.scalars(
            select(ApprovalVote.approver_id)
            .join(ActionProposal, ActionProposal.id == ApprovalVote.proposal_id)
            .where(ActionProposal.id == proposal.id, predicates.counting_vote(now))
        )
    )


def eligible_approvers(session, proposal: ActionProposal, now: datetime | None = None) -> list[OperatorUser]:
    """The operators of the proposal's installation who may still approve it (POL-7),
    by `eligible`; three queries (operators, makers' facts, votes).

    Args:
        session: a session; proposal: a flushed proposal row.
        now: the time votes are counted at (default: the clock's now).

    Returns:
        Operator rows, ordered by id.
    """
    from app.services.lifecycle.maker_lookup import makers_of

    operators = session.scalars(
        select(OperatorUser)
        .where(OperatorUser.installation_id == proposal.installation_id, OperatorUser.active.is_(True))
        .order_by(OperatorUser.id)
    ).all()
    makers = makers_of(session, proposal)
    voted = counting_voters(session, proposal, now)
    return [o for o in operators if eligible(o, proposal.approval_route, makers, voted)]


# -- the outbox ----------------------------------------------------------------------------


def mail_on() -> bool:
    """E-mail notices are made when ``MAIL_SERVER`` and ``PUBLIC_URL`` are set (a mailed
    link is built from ``PUBLIC_URL`` only, as for invitations)."""
    from app.services.admin.invitations import mail_configured

    return mail_configured()


def queue_notices(uow: UnitOfWork, proposal: ActionProposal) -> int:
    """Create the notices of a proposal that now waits for approval, in the caller's
    transaction (POL-7): one e-mail per eligible approver with an address (when
    `mail_on`) and one webhook notice per eligible approver (when the approval
    settings name ``notify_webhook_url``). After commit a sender job is enqueued.

    Returns:
        How many notice rows were added (0 when no channel is configured).
    """
    from app.services.approval_routing import current_settings

    from app.domain.states import ProposalState

    if proposal.bulk_batch_id or proposal.state != ProposalState.APPROVAL_REQUIRED:
        return 0  # a batch's items are approved with their batch; nothing waits otherwise
    session = uow.session
    channels = []
    if mail_on():
        channels.append(EMAIL)
    if current_settings(session, proposal.installation_id).notify_webhook_url:
        channels.append(WEBHOOK)
    if not channels:
        return 0
    added = 0
    for operator in eligible_approvers(session, proposal):
        for channel in channels:
            if channel == EMAIL and not operator.email:
                continue
            session.add(
                ApprovalNotice(
                    installation_id=proposal.installation_id,
                    subject_id=proposal.id,
                    operator_id=operator.id,
                    channel=channel,
                )
            )
            added += 1
    if added:
        session.flush()
        subject_id = proposal.id
        uow.after_commit(lambda: enqueue_notice_job(subject_id))
    return added


def enqueue_notice_job(subject_id: str) -> bool:
    """Enqueue the sender once per subject (best-effort: the sweep sends what a lost
    job did not)."""
    import redis
    from rq.exceptions import DuplicateJobError

    from app.queueing import delivery_queue

    digest = hashlib.sha256(subject_id.encode()).hexdigest()[:32]
    try:
        delivery_queue().enqueue(NOTICE_JOB, job_id=f"notices-{digest}", unique=True, result_ttl=0,
                                 failure_ttl=3600, job_timeout=300)
        return True
    except DuplicateJobError:
        return False
    except redis.RedisError:
        log.warning("could not enqueue the notices of %s; the sweep will", subject_id, exc_info=True)
        return False


@dataclass(frozen=True)
class NoticeContent:
    """What a notice says: the subject's reference, the action in words, a link."""

    subject: str
    action: str
    link: str

    def text(self) -> str:
        """The e-mail's body."""
        return (
            f"An action waits for your approval: {self.action} on {self.subject}.\n\n"
            f"Open it: {self.link}\n"
        )

    def document(self, notice: ApprovalNotice) -> dict:
        """The webhook's JSON document (nothing beyond the subject, action, link and ids)."""
        return {
            "type": "approval.waiting",
            "notice_id": notice.id,
            "subject_id": notice.subject_id,
            "subject": self.subject,
            "action": self.action,
            "link": self.link,
            "approver": notice.operator_id,
        }


def _content(proposal: ActionProposal) -> NoticeContent:
    from app.services.admin.invitations import public_url

    from app.services.admin.label_settings import configured_labels

    base = public_url() or ""
    return NoticeContent(
        subject=name_subject(proposal.target).words,  # the reference only: no platform text
        action=label_for(configured_labels(proposal.installation_id), "action", proposal.action_code),
        link=f"{base}/proposals/{proposal.id}",
    )


def _send_mail(to: str, content: NoticeContent) -> None:
    config = current_app.config
    message = EmailMessage()
    message["From"] = config.get("MAIL_SENDER") or "console@localhost"
    message["To"] = to
    message["Subject"] = f"Waiting for your approval: {content.action} on {content.subject}"
    message.set_content(content.text())
    with smtplib.SMTP(config["MAIL_SERVER"], int(config.get("MAIL_PORT") or 25), timeout=10) as smtp:
        if config.get("MAIL_STARTTLS"):
            smtp.starttls()
        smtp.send_message(message)


def _send_webhook(url: str, notice: ApprovalNotice, content: NoticeContent) -> None:
    from urllib.parse import urlsplit

    from app.egress import EgressPolicy, EgressRequest, send

    secret = current_app.config.get("NOTIFY_WEBHOOK_SECRET")
    if not secret:
        raise NoticeError("NOTIFY_WEBHOOK_SECRET is not set: webhook notices are not sent unsigned")
    body = json.dumps(content.document(notice), sort_keys=True, separators=(",", ":")).encode()
    request = EgressRequest(
        method="POST",
        url=url,
        body=body,
        message_id=f"msg_{notice.id}",
        idempotency_key=notice.id,
        timeout_seconds=WEBHOOK_TIMEOUT_SECONDS,
        signing_secret=secret,
    )
    host = urlsplit(url).hostname or ""
    send(request, EgressPolicy((host,), allow_private=bool(current_app.config.get("EGRESS_ALLOW_PRIVATE"))))


class NoticeError(Exception):
    """A notice that cannot be sent as configured."""


def _claim(notice_id: str, now: datetime) -> bool:
    """Take a pending, due notice for `LEASE_SECONDS` (one sender at a time)."""
    with unit_of_work() as uow:
        result = uow.session.execute(
            update(ApprovalNotice)
            .where(ApprovalNotice.id == notice_id, ApprovalNotice.state == "pending", ApprovalNotice.available_at <= now)
            .values(available_at=now + timedelta(seconds=LEASE_SECONDS))
            .execution_options(synchronize_session=False)
        )
        uow.commit()
    return result.rowcount == 1


def _finish(notice_id: str, error: str | None, attempts: int, now: datetime, *, give_up: bool = False) -> None:
    """Record an attempt: sent; failed (after `MAX_ATTEMPTS`, or `give_up`); or due
    again after the backoff."""
    if error is None:
        values = dict(state="sent", sent_at=utcnow(), attempts=attempts, last_error=None)
    elif give_up or attempts >= MAX_ATTEMPTS:
        values = dict(state="failed", attempts=attempts, last_error=error[:1000])
    else:
        delay = BACKOFF_SECONDS * 2 ** (attempts - 1)
        values = dict(attempts=attempts, last_error=error[:1000], available_at=now + timedelta(seconds=delay))
    with unit_of_work() as uow:
        uow.session.execute(
            update(ApprovalNotice).where(ApprovalNotice.id == notice_id).values(**values)
            .execution_options(synchronize_session=False)
        )
        uow.commit()


def send_pending_notices(now: datetime | None = None, limit: int = SEND_BATCH) -> int:
    """Send the notices due now (POL-7): each is claimed first, so two senders never
    send one notice twice; a failure is retried with backoff (`BACKOFF_SECONDS`
    doubling) and after `MAX_ATTEMPTS` the notice is ``failed`` with its error. A
    notice whose proposal no longer waits for approval is marked sent without sending.

    Returns:
        How many notices were sent.
    """
    from app.services.approval_routing import current_settings

    now = now or utcnow()
    due = db.session.execute(
        select(ApprovalNotice.id, ApprovalNotice.attempts)
        .where(ApprovalNotice.state == "pending", ApprovalNotice.available_at <= now)
        .order_by(ApprovalNotice.available_at)
        .limit(limit)
    ).all()
    db.session.rollback()  # end the read: each claim is its own short transaction
    sent = 0
    for notice_id, attempts in due:
        if not _claim(notice_id, now):
            continue
        notice = db.session.get(ApprovalNotice, notice_id)
        proposal = db.session.get(P, notice.subject_id)
        operator = db.session.get(OperatorUser, notice.operator_id)
        error = None
        if proposal is None or not _still_waiting(proposal, now):  # nothing to tell any more
            _finish(notice_id, "the proposal no longer waits for approval", attempts, now, give_up=True)
            continue
        content = _content(proposal)
        try:
            if notice.channel == EMAIL:
                if not current_app.config.get("MAIL_SERVER"):
                    raise NoticeError("MAIL_SERVER is not set")
                _send_mail(operator.email, content)
            else:
                url = current_settings(db.session, notice.installation_id).notify_webhook_url
                if not url:
                    raise NoticeError("the approval settings name no notify_webhook_url")
                _send_webhook(url, notice, content)
        except Exception as exc:  # noqa: BLE001 - any failure is recorded on the notice and retried
            error = f"{type(exc).__name__}: {getattr(exc, 'code', None) or exc}"
            log.warning("approval notice %s failed: %s", notice_id, error)
        _finish(notice_id, error, attempts + 1, now)
        sent += error is None
    return sent


def _still_waiting(proposal: ActionProposal, now: datetime) -> bool:
    return bool(
        db.session.scalar(select(func.count()).select_from(P).where(P.id == proposal.id, predicates.awaits_decision(now)))
    )
