"""What the attempt table and `flask proposal-history` say about each request
(DLV-4): its method and URL, when it finished, and whether its worker abandoned it."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select, update

from app.domain.attempts import attempt_status
from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, ConnectionAttempt

from ..builders import decide_report, login, make_world, reload, run_worker

ROOT = Path(__file__).resolve().parents[2]


def test_attempt_status_rule():
    """DLV-4: an unfinished attempt is in flight only while it is the current claim."""
    now = utcnow()
    later, earlier = now + timedelta(seconds=60), now - timedelta(seconds=1)
    assert attempt_status(True, 1, 1, "applied", None, now) == "finished"
    assert attempt_status(False, 2, 2, "applying", later, now) == "in_flight"
    assert attempt_status(False, 2, 2, "applying", earlier, now) == "abandoned"  # its lease ran out
    assert attempt_status(False, 1, 2, "applying", later, now) == "abandoned"  # a newer claim exists
    assert attempt_status(False, 1, 1, "applied", None, now) == "abandoned"  # terminal: nothing in flight
    assert attempt_status(False, 1, 1, "failed", None, now) == "abandoned"


def crash_after_response(app, tmp_path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": app.config["REDIS_URL"],
        "EGRESS_ALLOW_PRIVATE": "1",
        "INSTANCE_PATH": str(tmp_path / "worker"),
        "LOG_LEVEL": "ERROR",
        "FAILPOINTS": "after_response:1",
    }
    subprocess.run(
        [sys.executable, str(ROOT / "worker.py"), "--burst"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )


def test_page_and_history_show_method_url_finish_and_abandoned(app, client, platform, tmp_path):
    """DLV-4: a worker killed after the platform answered leaves an unfinished attempt;
    once the proposal is applied by the next claim, that attempt is marked abandoned,
    and every row names its method, URL and finish time."""
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    proposal = decide_report(world, 0)
    crash_after_response(app, tmp_path)
    db.session.rollback()
    assert reload(proposal).state == "applying"
    db.session.execute(update(ActionProposal).where(ActionProposal.id == proposal.id).values(lease_expires_at=utcnow()))
    db.session.commit()
    from app.services.lifecycle import sweeps

    sweeps.run_sweeps()
    run_worker(app)
    assert reload(proposal).state == "applied"
    attempts = db.session.scalars(
        select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id).order_by("attempt_number")
    ).all()
    assert [a.finished_at is None for a in attempts] == [True, False]
    url = attempts[0].url

    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    table = page[page.index('<table class="attempts">') :]
    table = table[: table.index("</table>")]
    assert table.count(f'POST <code class="url" title="{url}">{url}</code>') == 2  # QUEUE-6: cut, full in title
    assert "abandoned" in table and "in flight" not in table
    assert " ms</small>" in table  # the finished one says how long it took

    result = app.test_cli_runner().invoke(args=["proposal-history", proposal.id])
    assert result.exit_code == 0, result.output
    section = result.output.split("attempts:")[1].split("receipts:")[0]
    lines = [line for line in section.splitlines() if line.strip().startswith("#")]
    assert len(lines) == 2
    assert all(f"POST {url}" in line for line in lines)
    assert "abandoned" in lines[0] and "finished" in lines[1]
