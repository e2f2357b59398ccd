"""The CanonicalJSON column type: Python values in and out, RFC 8785 text stored.

The stored form is the text the product wrote by hand before the type existed
(``canonical_json(value)``), so no migration was needed: these tests read the
stored characters back with raw SQL on the backend the run uses.
"""

from __future__ import annotations

import json

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, Table, insert, select, text
from sqlalchemy.exc import StatementError

from app.domain.digests import canonical_json
from app.extensions import db
from app.models import Base, CanonicalJSON, SweepRun
from app.models.base import SealedJSON

probe_metadata = MetaData()
probe = Table(
    "json_probe",
    probe_metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("value", CanonicalJSON(), nullable=True),
)

VALUES = [
    {},
    [],
    {"b": [1, 2.5, "é"], "a": None, "c": 1.0},
    {"nested": {"z": True, "y": False, "x": [{"deep": [[]]}]}, "emoji": "🙂", "quote": '"\\'},
    [1e21, 1e-7, -0.0, 9007199254740991, "line\nbreak"],
    ["a string in a list"],
    42,
    True,
]


@pytest.fixture
def probe_table(app):
    probe_metadata.create_all(db.engine)
    yield probe
    db.session.rollback()
    probe_metadata.drop_all(db.engine)


def write(value, id: int = 1) -> None:
    db.session.execute(insert(probe).values(id=id, value=value))
    db.session.commit()


def stored_text(id: int = 1) -> str | None:
    return db.session.execute(text("SELECT value FROM json_probe WHERE id = :id"), {"id": id}).scalar()


@pytest.mark.parametrize("value", VALUES)
def test_a_value_reads_back_equal(probe_table, value):
    """ID-2: what is written comes back as the same Python value."""
    write(value)
    assert db.session.execute(select(probe.c.value)).scalar() == value


@pytest.mark.parametrize("value", VALUES)
def test_the_stored_text_is_what_the_old_code_wrote(probe_table, value):
    """ID-2: the column holds canonical_json(value), byte for byte (no migration)."""
    write(value)
    assert stored_text() == canonical_json(value)


def test_the_stored_text_is_rfc8785():
    """ID-2: keys sorted by code point, no spaces, shortest numbers, UTF-8 kept."""
    value = {"b": [1, 2.5, "é"], "a": None, "c": 1.0, "A": 1e21}
    assert CanonicalJSON().process_bind_param(value, None) == '{"A":1e+21,"a":null,"b":[1,2.5,"é"],"c":1}'


def test_rows_written_by_the_old_code_read_as_values(probe_table):
    """Rows stored before the type existed (canonical text) load as Python values."""
    old = canonical_json({"reference": "post:1", "reason": ["spam", 3]})
    db.session.execute(text("INSERT INTO json_probe (id, value) VALUES (1, :v)"), {"v": old})
    db.session.commit()
    assert db.session.execute(select(probe.c.value)).scalar() == {"reference": "post:1", "reason": ["spam", 3]}


def test_a_large_float_reads_back_as_the_float_it_was(probe_table):
    """ID-2: integral floats beyond 2^53 are stored as digits; they read as floats."""
    write({"n": 4.2e16, "m": -9007199254740992.0, "safe": 9007199254740991})
    assert stored_text() == '{"m":-9007199254740992,"n":42000000000000000,"safe":9007199254740991}'
    value = db.session.execute(select(probe.c.value)).scalar()
    assert value == {"n": 4.2e16, "m": -9007199254740992.0, "safe": 9007199254740991}
    assert [type(value[k]) for k in ("n", "m", "safe")] == [float, float, int]
    write(value, id=2)  # and can be written again, to the same text
    assert stored_text(2) == stored_text(1)


def test_none_is_sql_null(probe_table):
    write(None)
    assert db.session.execute(text("SELECT value IS NULL FROM json_probe")).scalar() in (True, 1)
    assert db.session.execute(select(probe.c.value)).scalar() is None


@pytest.mark.parametrize(
    "value", [float("nan"), {"x": float("inf")}, [float("-inf")], {"big": 2**53 + 1}, {"s": "\ud800"}]
)
def test_values_canonical_json_cannot_hold_are_refused(probe_table, value):
    """ID-2: NaN, infinities, integers beyond 2^53 and lone surrogates are refused; no row."""
    with pytest.raises(StatementError) as raised:
        db.session.execute(insert(probe).values(id=1, value=value))
    assert isinstance(raised.value.orig, rfc8785.CanonicalizationError)
    db.session.rollback()
    assert db.session.execute(select(probe.c.id)).all() == []


@pytest.mark.parametrize("value", ['{"a":1}', b'{"a":1}'])
def test_json_text_is_refused(probe_table, value):
    """A caller that passes JSON text instead of a value gets an error, not a JSON string."""
    with pytest.raises(StatementError) as raised:
        db.session.execute(insert(probe).values(id=1, value=value))
    assert isinstance(raised.value.orig, TypeError)


def test_a_mapped_column_stores_canonical_text(app):
    """The ORM path (a real table): SweepRun.counts is stored in counts_json as canonical text."""
    row = SweepRun(counts={"released": 2, "expired": 0, "delivered": 10})
    db.session.add(row)
    db.session.commit()
    raw = db.session.execute(text("SELECT counts_json FROM sweep_runs WHERE id = :id"), {"id": row.id}).scalar()
    assert raw == '{"delivered":10,"expired":0,"released":2}'
    db.session.expire_all()
    assert db.session.get(SweepRun, row.id).counts == {"released": 2, "expired": 0, "delivered": 10}


def test_changes_in_place_are_not_written(app):
    """The type's contract: values are immutable; a dict changed in place is never saved."""
    row = SweepRun(counts={"released": 1})
    db.session.add(row)
    db.session.commit()
    row.counts["released"] = 99
    db.session.commit()
    db.session.expire_all()
    assert db.session.get(SweepRun, row.id).counts == {"released": 1}
    row = db.session.get(SweepRun, row.id)
    row.counts = {**row.counts, "released": 99}  # assigning a new value is written
    db.session.commit()
    db.session.expire_all()
    assert db.session.get(SweepRun, row.id).counts == {"released": 99}


def test_every_json_column_uses_the_type():
    """Each ``*_json`` column holds canonical JSON through the type, except the audit
    details, whose exact stored characters the hash chain covers (AUD-2), and a
    change's secrets, canonical JSON sealed at rest (`SealedJSON`, OPS-3)."""
    json_named = {
        f"{table.name}.{column.name}"
        for table in Base.metadata.sorted_tables
        for column in table.columns
        if column.name.endswith("_json")
    }
    typed = {
        f"{table.name}.{column.name}"
        for table in Base.metadata.sorted_tables
        for column in table.columns
        if isinstance(column.type, CanonicalJSON)
    }
    assert typed == json_named - {"audit_events.details_json", "config_changes.secrets_json"}
    assert isinstance(Base.metadata.tables["config_changes"].c.secrets_json.type, SealedJSON)
    assert len(typed) == 34  # 17, three of config_changes (FOUR-2; the fourth is sealed), evidence media (REV-1),
    # temporary plans (TEMP-1), the delivery a proposal's approval binds (FOUR-5), a bulk batch's three (BULK-2),
    # erasure counts (OPS-4), the policy route on proposals and batches, approval settings, operators' attributes (POL),
    # a statement of reasons' body (DSA-2), DSA settings (DSA-1)


def test_every_json_column_of_a_lived_in_database_is_canonical(app, world):
    """After a decision, an approval and a delivery, every stored ``*_json`` text is
    its own canonical form (what the hand-written code stored)."""
    from tests.builders import approve, decide_report, run_worker

    approve(world, decide_report(world))
    run_worker(app)
    seen = 0
    for table in Base.metadata.sorted_tables:
        for column in table.columns:
            if isinstance(column.type, CanonicalJSON):
                for (raw,) in db.session.execute(text(f"SELECT {column.name} FROM {table.name}")):
                    if raw is not None:
                        assert raw == canonical_json(json.loads(raw)), f"{table.name}.{column.name}"
                        seen += 1
    assert seen >= 15


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00")),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_reading_and_writing_again_keeps_the_text(value):
    """ID-2: load then store gives the same value and text, so copying a value from one
    row to another (a correction's target from the original) keeps its digest. Found
    by this test: a float beyond 2^53 (4.2e16) is stored as digits and read back as an
    int, which canonical JSON then refused."""
    column = CanonicalJSON()
    stored = column.process_bind_param({"value": value}, None)
    loaded = column.process_result_value(stored, None)
    assert loaded == {"value": value}
    assert column.process_bind_param(loaded, None) == stored


@given(JSON_VALUES | st.integers(min_value=-(2**60), max_value=2**60).map(lambda n: {"n": n, "f": float(n)}))
def test_the_fast_read_equals_the_number_model(value):
    """ID-2: text without a run of 16 digits is read by the C decoder alone
    (`read_json`); what it gives equals the reading with `_json_number` on every
    integer, types included (an int stays an int, a float beyond 2^53 a float)."""
    from app.models.base import _NUMBER_MODEL, read_json

    try:
        stored = canonical_json(value)
    except Exception:  # values canonical JSON refuses are not stored
        return
    fast, careful = read_json(stored), _NUMBER_MODEL.decode(stored)
    assert fast == careful
    assert json.dumps(fast, sort_keys=True) == json.dumps(careful, sort_keys=True)  # int vs float shows here
