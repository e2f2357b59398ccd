"""The unit of work itself (app/services/uow.py): one transaction per use case, its
audit events written with it (AUD-1), savepoints that undo only their own part, and
after-commit callbacks whose errors are logged, never lost."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import func, select, text

from app.extensions import db
from app.models import AuditEvent, Installation
from app.services.uow import Actor, unit_of_work

SYSTEM = Actor.system("test")


@pytest.fixture
def installation_id(app) -> str:
    with unit_of_work() as uow:
        row = Installation(name="Unit of work", slug="uow")
        uow.session.add(row)
        uow.commit()
    return row.id


def audit(uow, installation_id: str, key: str) -> None:
    uow.audit(installation_id, key, f"test.{key}", SYSTEM, "installation", installation_id, {"key": key})


def add_installation(uow, slug: str) -> None:
    uow.session.add(Installation(name=slug, slug=slug))
    uow.session.flush()


def committed_slugs() -> set[str]:
    """Installations as another connection sees them (only what was committed)."""
    with db.engine.connect() as connection:
        return set(connection.execute(text("SELECT slug FROM installations")).scalars())


def audit_actions() -> list[str]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEvent.action).order_by(AuditEvent.seq)))


def test_leaving_without_commit_rolls_everything_back(app, installation_id):
    """AUD-1: rows, audit events and callbacks of an uncommitted unit of work all vanish."""
    ran = []
    with unit_of_work() as uow:
        add_installation(uow, "never-committed")
        audit(uow, installation_id, "dropped")
        uow.after_commit(lambda: ran.append("after"))
    assert committed_slugs() == {"uow"}
    assert audit_actions() == []
    assert ran == []
    assert uow.committed is False


def test_an_error_rolls_back_and_propagates(app, installation_id):
    """A refused request changes no row: the error reaches the caller, nothing is written."""
    ran = []
    with pytest.raises(RuntimeError, match="refused"), unit_of_work() as uow:
        add_installation(uow, "refused")
        audit(uow, installation_id, "refused")
        uow.after_commit(lambda: ran.append("after"))
        raise RuntimeError("refused")
    assert committed_slugs() == {"uow"}
    assert audit_actions() == []
    assert ran == []


def test_commit_writes_rows_and_audit_then_runs_callbacks_in_order(app, installation_id):
    """AUD-1: before-commit callbacks write inside the transaction; after-commit ones
    run once it is durable, in the order they were added."""
    seen = []

    def before():
        add_installation(uow, "written-before-commit")
        seen.append("before")

    with unit_of_work() as uow:
        add_installation(uow, "committed")
        audit(uow, installation_id, "first")
        audit(uow, installation_id, "second")
        uow.before_commit(before)
        uow.after_commit(lambda: seen.append(("after-1", "committed" in committed_slugs())))
        uow.after_commit(lambda: seen.append("after-2"))
        assert seen == []
        uow.commit()
        assert seen == ["before"]  # after-commit callbacks wait for the block to end
    assert seen == ["before", ("after-1", True), "after-2"]
    assert committed_slugs() == {"uow", "committed", "written-before-commit"}
    assert audit_actions() == ["test.first", "test.second"]


def test_a_refused_savepoint_drops_its_rows_audit_events_and_callbacks(app, installation_id):
    """AUD-1: only the savepoint's own part is undone; the unit of work carries on."""
    ran = []
    with unit_of_work() as uow:
        add_installation(uow, "outer")
        audit(uow, installation_id, "before-savepoint")
        uow.after_commit(lambda: ran.append("outer"))
        with pytest.raises(ValueError), uow.savepoint():
            add_installation(uow, "inner")
            audit(uow, installation_id, "inside-savepoint")
            uow.after_commit(lambda: ran.append("inner"))
            raise ValueError("refused inside")
        audit(uow, installation_id, "after-savepoint")
        uow.commit()
    assert committed_slugs() == {"uow", "outer"}
    assert audit_actions() == ["test.before-savepoint", "test.after-savepoint"]
    assert ran == ["outer"]


def test_a_savepoint_that_succeeds_keeps_its_part(app, installation_id):
    ran = []
    with unit_of_work() as uow:
        with uow.savepoint():
            add_installation(uow, "inner")
            audit(uow, installation_id, "inside-savepoint")
            uow.after_commit(lambda: ran.append("inner"))
        uow.commit()
    assert committed_slugs() == {"uow", "inner"}
    assert audit_actions() == ["test.inside-savepoint"]
    assert ran == ["inner"]


def test_a_failing_before_commit_callback_rolls_back_everything(app, installation_id):
    ran = []

    def refuse():
        raise RuntimeError("wake-up refused")

    with pytest.raises(RuntimeError, match="wake-up refused"), unit_of_work() as uow:
        add_installation(uow, "doomed")
        audit(uow, installation_id, "doomed")
        uow.before_commit(refuse)
        uow.after_commit(lambda: ran.append("after"))
        uow.commit()
    assert committed_slugs() == {"uow"}
    assert audit_actions() == []
    assert ran == []


def failing_callback():
    raise RuntimeError("redis went away")


def test_after_commit_errors_are_logged_and_the_other_callbacks_still_run(app, installation_id, caplog):
    """The commit stands; the failure is logged at ERROR with its traceback and the
    callback's name (the sweeps repair what it left undone), and later callbacks run."""
    ran = []
    with caplog.at_level(logging.ERROR, logger="app.services.uow"), unit_of_work() as uow:
        add_installation(uow, "committed")
        uow.after_commit(failing_callback)
        uow.after_commit(lambda: ran.append("next"))
        uow.commit()
    assert committed_slugs() == {"uow", "committed"}
    assert ran == ["next"]
    [record] = [r for r in caplog.records if r.name == "app.services.uow"]
    assert record.levelno == logging.ERROR
    assert "failing_callback" in record.getMessage()
    assert record.exc_info and isinstance(record.exc_info[1], RuntimeError)
    assert str(record.exc_info[1]) == "redis went away"


def test_an_error_after_commit_keeps_the_commit_and_its_callbacks(app, installation_id):
    """What committed is durable: its after-commit callbacks (enqueueing the delivery)
    still run when the block fails afterwards, and the error still reaches the caller."""
    ran = []
    with pytest.raises(RuntimeError, match="after the commit"), unit_of_work() as uow:
        add_installation(uow, "committed")
        audit(uow, installation_id, "committed")
        uow.after_commit(lambda: ran.append("enqueue"))
        uow.commit()
        raise RuntimeError("after the commit")
    assert committed_slugs() == {"uow", "committed"}
    assert audit_actions() == ["test.committed"]
    assert ran == ["enqueue"]


def test_each_unit_of_work_starts_from_fresh_data(app, installation_id):
    """A read transaction left open on the session is ended first, so a unit of work
    never decides on a stale snapshot (SQLite keeps one open until it ends)."""
    assert db.session.scalar(select(func.count()).select_from(Installation)) == 1  # opens a read
    with db.engine.begin() as other:
        other.execute(
            text("INSERT INTO installations (id, name, slug, created_at) VALUES ('ins_other', 'o', 'o', :t)"),
            {"t": "2026-12-01 00:00:00"},
        )
    with unit_of_work() as uow:
        assert uow.session.scalar(select(func.count()).select_from(Installation)) == 2


def _rename(slug: str, to: str):
    from sqlalchemy import bindparam, update

    table = Installation.__table__
    statement = update(table).where(table.c.slug == bindparam("from_slug")).values(name=bindparam("to_name"))
    return statement, {"from_slug": slug, "to_name": to}


def test_without_savepoints_an_error_in_a_savepoint_asks_for_the_careful_try(installation_id):
    """A unit of work without savepoints (a batch's first try) turns an error inside
    `savepoint()` into RetryWithSavepoints, which `except Exception` does not catch,
    and nothing of the try is committed."""
    from app.services.uow import RetryWithSavepoints

    with pytest.raises(RetryWithSavepoints), unit_of_work(savepoints=False) as uow:
        add_installation(uow, "first-try")
        try:
            with uow.savepoint():
                raise ValueError("a check failed")
        except Exception:  # what a caller does with savepoints: carry on
            pytest.fail("the error must not be handled as if a savepoint had undone it")
    assert "first-try" not in committed_slugs()


def test_deferred_writes_go_out_at_commit_and_a_guard_that_missed_asks_for_the_careful_try(installation_id):
    """`write_later` runs at commit, one executemany per statement; with
    ``every_row`` a write that changed no row raises RetryWithSavepoints and the
    transaction commits nothing. With savepoints the write runs at once."""
    from app.services.uow import RetryWithSavepoints

    with unit_of_work(savepoints=False) as uow:
        uow.write_later(*_rename("uow", "renamed later"), every_row=True)
        assert db.session.scalar(select(Installation.name).where(Installation.id == installation_id)) == "Unit of work"
        uow.commit()
    assert db.session.scalar(select(Installation.name).where(Installation.id == installation_id)) == "renamed later"
    with pytest.raises(RetryWithSavepoints), unit_of_work(savepoints=False) as uow:
        add_installation(uow, "guarded")
        uow.write_later(*_rename("uow", "twice"), every_row=True)
        uow.write_later(*_rename("no-such-slug", "never"), every_row=True)
        uow.commit()
    assert "guarded" not in committed_slugs()
    db.session.rollback()
    assert db.session.scalar(select(Installation.name).where(Installation.id == installation_id)) == "renamed later"
    with unit_of_work() as uow:  # with savepoints: at once
        uow.write_later(*_rename("uow", "at once"))
        assert db.session.scalar(select(Installation.name).where(Installation.id == installation_id)) == "at once"
