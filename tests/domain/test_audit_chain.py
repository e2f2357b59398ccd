"""The audit hash chain and its checkpoints as pure functions (AUD-2, REC-3, REC-4):
the row hashes, the checkpoint signature and the walk that verifies a chain."""

from __future__ import annotations

import pytest

from app.domain.audit_chain import (
    GENESIS_HASH,
    ChainReport,
    ChainWalk,
    Checkpoint,
    hash_scheme,
    key_id,
    keyed_row_hash,
    legacy_row_hash,
    read_checkpoint,
    sign_checkpoint,
)

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
KEY_ID = "6ffe9ebd023c20bf"  # key_id(KEY), pinned: stored hashes name it
AT = "2026-01-01T00:00:00Z"


def material(seq: int, action: str = "action.approved") -> dict:
    return {"installation_id": "inst", "seq": seq, "action": action, "details_json": "{}"}


def chain(actions: list[str], key: bytes = KEY, legacy: int = 0) -> list[tuple]:
    """Rows (seq, action, prev_hash, row_hash, material) as the writer chains them:
    the first ``legacy`` rows unkeyed, the rest under ``key``."""
    rows, prev = [], GENESIS_HASH
    for seq, action in enumerate(actions, start=1):
        fields = material(seq, action)
        row_hash = legacy_row_hash(prev, fields) if seq <= legacy else keyed_row_hash(prev, fields, key)
        rows.append((seq, action, prev, row_hash, fields))
        prev = row_hash
    return rows


def walk(rows, checkpoints=(), key: bytes = KEY) -> ChainReport:
    chain_walk = ChainWalk("inst", key, list(checkpoints))
    for row in rows:
        chain_walk.feed(*row)
    return chain_walk.finish()


def checkpoint_of(rows, seq: int, at: str = AT, rows_count: int | None = None, head: str | None = None) -> Checkpoint:
    return Checkpoint("inst", seq, head or rows[seq - 1][3], seq if rows_count is None else rows_count, at)


# --- the row hashes ------------------------------------------------------------------


def test_key_id_is_a_stable_public_name_of_the_key():
    """REC-3: the key id is 16 hex characters, the same in every process holding the key."""
    assert key_id(KEY) == KEY_ID
    assert key_id(OTHER_KEY) != KEY_ID


def test_legacy_row_hash_is_plain_sha256_of_prev_and_canonical_fields():
    """AUD-2: rows of the first version keep verifying: sha256 over prev hash, newline, JCS fields."""
    assert legacy_row_hash(GENESIS_HASH, {"seq": 1, "action": "a"}) == (
        "sha256:102709b7e8b65dbe196a838ebaaf967ecdf205fb364f1e2848348f7e6f0f9a71"
    )


def test_rec3_keyed_row_hash_is_an_hmac_naming_its_key():
    """REC-3: ``hmac-sha256:{key id}:{hex}``, 93 characters, an HMAC only the key holder can recompute."""
    row_hash = keyed_row_hash(GENESIS_HASH, {"seq": 1, "action": "a"}, KEY)
    assert row_hash == ("hmac-sha256:6ffe9ebd023c20bf:4de7ca8001cf0322a84ec27bd0aabb73cb7c10728f3d5196487a82b3585e01ff")
    assert len(row_hash) == 93
    assert keyed_row_hash(GENESIS_HASH, {"seq": 1, "action": "a"}, OTHER_KEY) != row_hash
    assert keyed_row_hash(GENESIS_HASH, {"seq": 1, "action": "b"}, KEY) != row_hash


@pytest.mark.parametrize(
    ("row_hash", "scheme"),
    [
        ("sha256:" + "a" * 64, ("sha256", None)),
        ("hmac-sha256:6ffe9ebd023c20bf:" + "b" * 64, ("hmac-sha256", "6ffe9ebd023c20bf")),
        ("sha256:a:b", ("", None)),
        ("hmac-sha256:" + "b" * 64, ("", None)),
        ("hmac-sha256:a:b:c", ("", None)),
        ("md5:" + "a" * 32, ("", None)),
        ("sha256", ("", None)),
    ],
)
def test_hash_scheme_reads_the_stored_form(row_hash, scheme):
    """AUD-2, REC-3: a stored hash names its scheme (and, keyed, its key id)."""
    assert hash_scheme(row_hash) == scheme


# --- checkpoints ---------------------------------------------------------------------


def test_rec4_checkpoint_is_signed_with_a_key_derived_from_the_chain_key():
    """REC-4: the checkpoint's fields, its key id and a pinned signature."""
    assert sign_checkpoint("inst", 3, "h", 3, AT, KEY) == {
        "kind": "audit_checkpoint",
        "v": 1,
        "installation_id": "inst",
        "seq": 3,
        "head_hash": "h",
        "rows": 3,
        "at": AT,
        "key_id": KEY_ID,
        "signature": "hmac-sha256:c50a2a7985d57a98a06b8cbfed0e1bcf694dd579689217f51bfa9fa1f5e952b5",
    }


def test_rec4_checkpoint_signature_is_not_the_row_hmac():
    """REC-4: the checkpoint key is derived, so a row HMAC cannot be replayed as a signature."""
    signed = sign_checkpoint("inst", 0, GENESIS_HASH, 0, AT, KEY)
    assert signed["signature"] != sign_checkpoint("inst", 0, GENESIS_HASH, 0, AT, OTHER_KEY)["signature"]


@pytest.mark.parametrize("wrapped", [False, True])
def test_rec4_a_signed_checkpoint_reads_back(wrapped):
    """REC-4: a checkpoint reads back as written, bare or inside a log record."""
    signed = sign_checkpoint("inst", 0, "head", 0, AT, KEY)
    record = {"message": "checkpoint", "audit_checkpoint": signed} if wrapped else signed
    assert read_checkpoint(record, KEY) == Checkpoint("inst", 0, "head", 0, AT)
    assert read_checkpoint(sign_checkpoint("i2", 7, "h7", 5, "t", KEY), KEY) == Checkpoint("i2", 7, "h7", 5, "t")


@pytest.mark.parametrize(
    "record",
    [
        None,
        "audit_checkpoint",
        {"audit_checkpoint": "not an object"},
        {**sign_checkpoint("inst", 1, "h", 1, AT, KEY), "kind": "other"},
        {**sign_checkpoint("inst", 1, "h", 1, AT, KEY), "v": 2},
        {k: v for k, v in sign_checkpoint("inst", 1, "h", 1, AT, KEY).items() if k != "v"},
    ],
)
def test_rec4_what_is_not_a_checkpoint_is_refused(record):
    """REC-4: anything but a version-1 checkpoint is refused by name."""
    with pytest.raises(ValueError, match="^not an audit checkpoint$"):
        read_checkpoint(record, KEY)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("installation_id", None),
        ("installation_id", 1),
        ("head_hash", None),
        ("at", 5),
        ("seq", None),
        ("seq", "1"),
        ("seq", True),
        ("seq", 1.0),
        ("seq", -1),
        ("rows", None),
        ("rows", False),
        ("rows", -1),
    ],
)
def test_rec4_a_checkpoint_field_of_the_wrong_type_is_refused(name, value):
    """REC-4: strings are strings, seq and rows are non-negative integers (not booleans)."""
    record = {**sign_checkpoint("inst", 1, "h", 1, AT, KEY), name: value}
    with pytest.raises(ValueError, match="^a checkpoint field is missing or of the wrong type$"):
        read_checkpoint(record, KEY)


def test_rec4_a_checkpoint_under_another_key_is_refused_naming_both_key_ids():
    """REC-4: the process is told it holds the wrong key, not that the checkpoint was forged."""
    with pytest.raises(ValueError) as refused:
        read_checkpoint(sign_checkpoint("inst", 1, "h", 1, AT, OTHER_KEY), KEY)
    assert str(refused.value) == (f"signed under key id {key_id(OTHER_KEY)}, but AUDIT_CHAIN_KEY has key id {KEY_ID}")


@pytest.mark.parametrize(
    "change",
    [
        {"installation_id": "other"},
        {"seq": 2},
        {"head_hash": "h2"},
        {"rows": 2},
        {"at": "2026-01-02T00:00:00Z"},
        {"signature": "hmac-sha256:" + "0" * 64},
        {"signature": None},
    ],
)
def test_rec4_an_altered_checkpoint_is_refused(change):
    """REC-4: every signed field is covered; a changed one or a missing signature is refused."""
    record = {**sign_checkpoint("inst", 1, "h", 1, AT, KEY), **change}
    with pytest.raises(ValueError, match=r"^signature does not match its content \(the checkpoint was altered"):
        read_checkpoint(record, KEY)


# --- walking a chain -----------------------------------------------------------------


def test_an_empty_chain_is_ok():
    """AUD-2: no rows, nothing broken."""
    assert walk([]) == ChainReport("inst", 0, None, None, 0, 0, 0)
    assert walk([]).ok


def test_rec3_a_keyed_chain_verifies():
    """REC-3: seq 1..n, each prev_hash the previous hash, each hash the HMAC of its fields."""
    report = walk(chain(["a", "b", "c"]))
    assert report == ChainReport("inst", 3, None, None, legacy_rows=0, checkpoints_checked=0, head_seq=3)
    assert report.ok


def test_a_missing_row_is_reported_at_the_sequence_expected():
    """AUD-2: a deleted row shows as the first sequence missing; later rows are not counted."""
    rows = chain(["a", "b", "c", "d"])
    report = walk([rows[0], rows[2], rows[3]])
    assert (report.first_broken_seq, report.reason, report.rows_checked) == (2, "missing row", 2)
    assert report.head_seq == 1 and not report.ok
    assert walk(rows[1:]).first_broken_seq == 1


def test_a_broken_prev_hash_is_reported():
    """AUD-2: each row's prev_hash must be the previous row's hash."""
    rows = chain(["a", "b", "c"])
    seq, action, _prev, row_hash, fields = rows[1]
    report = walk([rows[0], (seq, action, GENESIS_HASH, row_hash, fields), rows[2]])
    assert (report.first_broken_seq, report.reason) == (2, "previous hash does not match")
    assert (report.rows_checked, report.head_seq) == (2, 1)


def test_rec3_an_edited_keyed_row_is_reported():
    """REC-3: a row's fields changed after writing no longer match its HMAC."""
    rows = chain(["a", "b"])
    seq, action, prev, row_hash, fields = rows[1]
    report = walk([rows[0], (seq, action, prev, row_hash, {**fields, "details_json": '{"x":1}'})])
    assert (report.first_broken_seq, report.reason, report.head_seq) == (2, "row contents changed", 1)


def test_an_edited_legacy_row_is_reported():
    """AUD-2: unkeyed rows are still checked against their SHA-256."""
    rows = chain(["a", "b"], legacy=2)
    seq, action, prev, row_hash, fields = rows[0]
    report = walk([(seq, action, prev, row_hash, {**fields, "action": "forged"}), rows[1]])
    assert (report.first_broken_seq, report.reason, report.rows_checked) == (1, "row contents changed", 1)
    assert report.legacy_rows == 1


def test_an_unknown_hash_scheme_is_reported():
    """AUD-2: a hash in no known form breaks the chain."""
    report = walk([(1, "a", GENESIS_HASH, "md5:abc", material(1))])
    assert (report.first_broken_seq, report.reason) == (1, "unknown hash scheme")


def test_rec3_a_chain_under_another_key_names_both_key_ids():
    """REC-3: a process holding the wrong key is told so, not told the rows changed."""
    report = walk(chain(["a"], key=OTHER_KEY))
    assert report.first_broken_seq == 1
    assert report.reason == f"written under key id {key_id(OTHER_KEY)}, but AUDIT_CHAIN_KEY has key id {KEY_ID}"


def test_rec3_a_chain_rechained_without_the_key_is_reported():
    """REC-3: an unkeyed row after keyed ones is how a rewrite without the key shows."""
    keyed = chain(["a"])
    prev = keyed[0][3]
    fields = material(2)
    report = walk([keyed[0], (2, "b", prev, legacy_row_hash(prev, fields), fields)])
    assert report.first_broken_seq == 2
    assert report.reason == "unkeyed row after keyed rows (rewritten without the chain key)"


def test_rec3_keyed_rows_after_unkeyed_ones_need_the_rechained_row():
    """REC-3: only an ``audit.rechained`` row may seal the unkeyed rows before it."""
    report = walk(chain(["a", "b", "c"], legacy=1))
    assert (report.first_broken_seq, report.legacy_rows) == (2, 1)
    assert report.reason == "keyed rows follow unkeyed ones without an audit.rechained row"


def test_rec3_unkeyed_rows_sealed_by_a_rechained_row_verify():
    """REC-3: legacy rows, then ``audit.rechained``, then keyed rows: ok, and the legacy rows counted."""
    report = walk(chain(["a", "b", "audit.rechained", "c"], legacy=2))
    assert report == ChainReport("inst", 4, None, None, legacy_rows=2, checkpoints_checked=0, head_seq=4)


def test_rec3_unsealed_unkeyed_rows_ask_for_audit_rekey():
    """REC-3: a chain of only unkeyed rows is reported until it is sealed under the key."""
    report = walk(chain(["a", "b"], legacy=2))
    assert report.first_broken_seq is None and not report.ok
    assert report.reason == (
        "2 rows were hashed without AUDIT_CHAIN_KEY; run `flask audit-rekey` to seal them under the key"
    )
    assert (report.rows_checked, report.legacy_rows, report.head_seq) == (2, 2, 2)


def test_rows_after_a_break_are_ignored():
    """AUD-2: the report names the first break; a later one does not replace it."""
    rows = chain(["a", "b", "c"])
    seq, action, prev, row_hash, fields = rows[0]
    chain_walk = ChainWalk("inst", KEY)
    chain_walk.feed(seq, action, prev, row_hash, {**fields, "action": "forged"})
    assert chain_walk.broken
    chain_walk.feed(*rows[1])
    chain_walk.feed(5, "x", "bad", "md5:x", {})
    assert chain_walk.rows_checked == 1
    assert chain_walk.finish() == ChainReport("inst", 1, 1, "row contents changed", 0, 0, 0)


def test_a_walk_is_not_broken_while_rows_verify():
    chain_walk = ChainWalk("inst", KEY)
    for row in chain(["a", "b"]):
        chain_walk.feed(*row)
    assert not chain_walk.broken


def test_rec4_agreeing_checkpoints_are_counted():
    """REC-4: checkpoints at rows the chain has agree with it; each one is counted."""
    rows = chain(["a", "b", "c"])
    checkpoints = [checkpoint_of(rows, 1), checkpoint_of(rows, 3), checkpoint_of(rows, 3, at="later")]
    report = walk(rows, checkpoints)
    assert report == ChainReport("inst", 3, None, None, legacy_rows=0, checkpoints_checked=3, head_seq=3)


def test_rec4_a_checkpoint_at_the_head_is_not_a_cut_tail():
    rows = chain(["a", "b"])
    assert walk(rows, [checkpoint_of(rows, 2)]).ok


@pytest.mark.parametrize("what", ["head_hash", "rows"])
def test_rec4_a_rechained_chain_disagrees_with_its_checkpoint(what):
    """REC-4: rows changed and rechained with the key still disagree with an older checkpoint,
    by their hash or by their count."""
    rows = chain(["a", "b", "c"])
    checkpoint = (
        checkpoint_of(rows, 2, head="hmac-sha256:x:y") if what == "head_hash" else checkpoint_of(rows, 2, rows_count=3)
    )
    report = walk(rows, [checkpoint])
    assert (report.first_broken_seq, report.rows_checked, report.checkpoints_checked) == (2, 2, 1)
    rows_seen = 2 if what == "head_hash" else 3
    assert report.reason == (
        f"rewritten: the checkpoint of {AT} saw another head at seq 2 ({rows_seen} rows); "
        "rows from the first row up to seq 2 were changed and rechained"
    )


def test_rec4_a_rewrite_is_dated_from_the_last_agreeing_checkpoint():
    """REC-4: the report says which rows may have been rewritten: those after the last agreement."""
    rows = chain(["a", "b", "c", "d"])
    checkpoints = [checkpoint_of(rows, 2), checkpoint_of(rows, 4, at="t4", head="hmac-sha256:x:y")]
    report = walk(rows, checkpoints)
    assert (report.first_broken_seq, report.checkpoints_checked) == (4, 2)
    assert report.reason == (
        "rewritten: the checkpoint of t4 saw another head at seq 4 (4 rows); "
        "rows after seq 2 up to seq 4 were changed and rechained"
    )


def test_rec4_the_first_disagreeing_checkpoint_at_a_seq_stops_the_walk():
    rows = chain(["a", "b"])
    checkpoints = [checkpoint_of(rows, 1, at="bad", head="hmac-sha256:x:y"), checkpoint_of(rows, 1, at="good")]
    report = walk(rows, checkpoints)
    assert (report.first_broken_seq, report.checkpoints_checked, report.rows_checked) == (1, 1, 1)
    assert "checkpoint of bad" in report.reason and "from the first row" in report.reason


def test_rec4_a_cut_tail_is_reported_from_the_latest_checkpoint_beyond_it():
    """REC-4: rows deleted from the end show against the checkpoints that saw them."""
    rows = chain(["a", "b", "c", "d", "e"])
    checkpoints = [
        checkpoint_of(rows, 2),
        checkpoint_of(rows, 4, at="t4"),
        checkpoint_of(rows, 5, at="t5a"),
        checkpoint_of(rows, 5, at="t5b"),
        checkpoint_of(rows, 3, at="t3"),
    ]
    report = walk(rows[:2], checkpoints)
    assert report == ChainReport(
        "inst",
        2,
        3,
        "cut tail: the checkpoint of t5b saw seq 5 (5 rows); the database ends at seq 2 (2 rows)",
        legacy_rows=0,
        checkpoints_checked=1,
        head_seq=2,
    )


def test_rec4_a_cut_tail_is_reported_on_an_emptied_chain():
    rows = chain(["a"])
    report = walk([], [checkpoint_of(rows, 1)])
    assert (report.first_broken_seq, report.head_seq, report.rows_checked) == (1, 0, 0)
    assert (
        report.reason
        == "cut tail: the checkpoint of 2026-01-01T00:00:00Z saw seq 1 (1 rows); the database ends at seq 0 (0 rows)"
    )


def test_rec4_checkpoints_may_be_given_as_any_iterable():
    rows = chain(["a"])
    chain_walk = ChainWalk("inst", KEY, iter([checkpoint_of(rows, 1)]))
    chain_walk.feed(*rows[0])
    assert chain_walk.finish().checkpoints_checked == 1


def test_a_break_is_reported_before_a_cut_tail():
    rows = chain(["a", "b", "c"])
    report = walk([rows[0], rows[2]], [checkpoint_of(rows, 3)])
    assert (report.first_broken_seq, report.reason) == (2, "missing row")
