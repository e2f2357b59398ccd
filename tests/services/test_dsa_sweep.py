"""The Transparency Database connection and the sweep that submits statements of
reasons (app/services/dsa/connection.py, app/services/dsa/sweep.py, SPEC DSA-3)."""

from __future__ import annotations

from sqlalchemy import select, text

from app.demo_dsa import DEMO_DSA_SETTINGS
from app.extensions import db
from app.models import Connection, ConnectionVersion, DsaStatement
from app.services.dsa import sweep
from app.services.dsa.connection import endpoint_status
from app.services.dsa.settings import current_settings
from app.services.lifecycle.sweeps import run_sweeps
from app.services.uow import unit_of_work
from tests.builders import set_dsa_settings
from tests.services.test_dsa_submission import pending_statements, states


def tdb_connection(world, tdb, *, token: str | None = "tdb-token", allowed=("127.0.0.1",), slug: str = "tdb",
                   rate: float | None = 50.0, base_url: str | None = None) -> str:
    """A Transparency Database connection (its token sealed as every connection's)
    named by the DSA settings in force; returns the connection's id."""
    with unit_of_work() as uow:
        connection = Connection(installation_id=world.installation_id, name="EU Transparency Database", slug=slug)
        uow.session.add(connection)
        uow.session.flush()
        uow.session.add(
            ConnectionVersion(
                installation_id=world.installation_id,
                connection_id=connection.id,
                version=1,
                base_url=base_url or tdb.base_url,
                bearer_token=token,
                timeout_seconds=5,
                allowed_hosts=list(allowed),
                rate_limit_per_second=rate,
            )
        )
        uow.commit()
        connection_id = connection.id
    set_dsa_settings(world.installation_id, {**DEMO_DSA_SETTINGS, "tdb_connection": slug})
    return connection_id


def status(world):
    db.session.rollback()
    settings = current_settings(db.session, world.installation_id)
    return endpoint_status(db.session, world.installation_id, settings)


def test_dsa3_the_endpoint_comes_from_the_connection_with_its_sealed_token(app, world, tdb):
    """DSA-3, OPS-3: the endpoint is the named connection's newest version: its base
    URL, its token (stored sealed, opened to send), timeout, rate limit, allowed hosts."""
    tdb_connection(world, tdb, rate=20.0)
    raw = db.session.execute(text("SELECT bearer_token FROM connection_versions WHERE base_url = :u"),
                             {"u": tdb.base_url}).scalar_one()  # fmt: skip
    assert "tdb-token" not in raw
    found = status(world)
    assert found.problem is None and found.connection_name == "EU Transparency Database"
    endpoint = found.endpoint
    assert (endpoint.base_url, endpoint.token, endpoint.rate_limit_per_second) == (tdb.base_url, "tdb-token", 20.0)
    assert (endpoint.timeout_seconds, endpoint.allowed_hosts) == (5.0, ("127.0.0.1",))
    pending_statements(world, 3)
    assert sweep.submit_due_statements() == 3
    assert [call.count for call in tdb.batches()] == [3]  # the server accepted the opened token
    assert set(states().values()) == {"submitted"}


def test_dsa3_without_a_connection_or_token_nothing_is_sent(app, world, tdb):
    """DSA-3, OPS-3: DSA on but no connection named, a slug no connection has, no
    token, or a token no key opens: nothing is sent, statements stay pending, and the
    reason has a code."""
    pending_statements(world, 2)
    set_dsa_settings(world.installation_id)  # the demo's: no connection named
    assert status(world).problem == "tdb_connection_not_set"
    assert sweep.submit_due_statements() == 0
    set_dsa_settings(world.installation_id, {**DEMO_DSA_SETTINGS, "tdb_connection": "nowhere"})
    assert status(world).problem == "tdb_connection_not_found"
    tdb_connection(world, tdb, token=None)
    assert status(world).problem == "tdb_token_missing"
    assert status(world).problem_words == "the connection has no API token."
    assert sweep.submit_due_statements() == 0
    sealed_elsewhere = app.extensions["secret_box"].seal("tdb-token", context="another.column")
    with unit_of_work() as uow:  # OPS-3: a value that does not open here (sealed for another column)
        uow.session.execute(text("UPDATE connection_versions SET bearer_token = :v WHERE base_url = :u"),
                            {"v": sealed_elsewhere, "u": tdb.base_url})  # fmt: skip
        uow.commit()
    assert status(world).problem == "tdb_token_unreadable"
    assert sweep.submit_due_statements() == 0
    assert tdb.batches() == [] and set(states().values()) == {"pending"}


def test_dsa3_a_host_outside_the_allowed_hosts_is_refused_by_egress(app, world, tdb):
    """DSA-3, SEC-2: a base URL whose host is not among the connection's allowed
    hosts sends nothing (egress refuses); the statements stay pending, not counted as
    sent, and the installation is held with egress's code."""
    tdb_connection(world, tdb, allowed=("transparency.dsa.ec.europa.eu",))
    pending_statements(world, 2)
    assert sweep.submit_due_statements() == 0
    assert tdb.batches() == []
    rows = db.session.scalars(select(DsaStatement)).all()
    assert {(r.state, r.attempts, r.last_error, r.claim_token) for r in rows} == {
        ("pending", 0, "egress_host_not_allowed", None)
    }
    held = sweep.hold_of(world.installation_id)
    assert held is not None and held.error == "egress_host_not_allowed"


def test_dsa3_the_sweep_submits_pending_statements(app, world, tdb):
    """DSA-3: the periodic sweep sends every pending statement once, in batches of at
    most 100, and records how many it submitted."""
    tdb_connection(world, tdb, rate=None)
    puids = pending_statements(world, 150)
    counts = run_sweeps()
    assert counts.statements_submitted == 150
    assert [call.count for call in tdb.batches()] == [100, 50]
    assert set(tdb.statements) == set(puids)
    assert run_sweeps().statements_submitted == 0 and len(tdb.batches()) == 2


def test_dsa3_the_sweep_keeps_the_wait_the_database_asked_for(app, world, tdb):
    """DSA-3: after a 429 with Retry-After the installation is held: the next sweep
    sends nothing while the hold lasts, and sends everything once it ended."""
    tdb_connection(world, tdb)
    pending_statements(world, 5)
    tdb.force_429(1, retry_after=60)
    assert sweep.submit_due_statements() == 0
    held = sweep.hold_of(world.installation_id)
    assert held is not None and held.error == "tdb_rate_limited"
    assert sweep.submit_due_statements() == 0
    assert len(tdb.batches()) == 1  # the 429 only: the hold kept the second sweep quiet
    from app.queueing import get_redis

    get_redis().delete(sweep.HOLD_PREFIX + world.installation_id)  # the hold's time ran out
    assert sweep.submit_due_statements() == 5
    assert [call.status for call in tdb.batches()] == [429, 201]


def test_dsa3_dsa_off_sends_nothing(app, world, tdb):
    """DSA-3: an installation whose DSA settings are off submits nothing, even with
    a connection and pending statements."""
    tdb_connection(world, tdb)
    set_dsa_settings(world.installation_id, {**DEMO_DSA_SETTINGS, "enabled": False, "tdb_connection": "tdb"})
    pending_statements(world, 2)
    assert sweep.submit_due_statements() == 0
    assert tdb.batches() == []
