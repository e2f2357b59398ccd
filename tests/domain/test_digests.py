"""JSON from a platform read strictly (RCPT-1, API-1): a key named twice is refused."""

import pytest

from app.domain.digests import DuplicateKey, decode_json


def test_rcpt1_a_key_named_twice_is_refused_naming_it():
    """RCPT-1, API-1: ``{"status": "applied", "status": "failed"}`` says two things."""
    with pytest.raises(DuplicateKey) as caught:
        decode_json('{"status": "applied", "status": "failed"}')
    assert caught.value.key == "status"
    assert str(caught.value) == "the key 'status' appears twice in one object"
    with pytest.raises(DuplicateKey):
        decode_json(b'{"a": {"b": 1, "b": 1}}')  # in a nested object, even with one value


def test_rcpt1_distinct_keys_decode_as_json():
    """RCPT-1: the same key in two objects is no duplicate."""
    assert decode_json('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}') == {"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}
    assert decode_json(b"[1, 2]") == [1, 2]
    with pytest.raises(ValueError):
        decode_json("{not json")


# --- canonical JSON: the fast path agrees with RFC 8785 (ID-2) -------------------------

import rfc8785  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from app.domain.digests import canonical_json  # noqa: E402

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) - 5, 2**53 + 5) | st.text() | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_id2_canonical_json_is_rfc8785_for_any_value(value):
    """ID-2: `canonical_json` is RFC 8785 (the `rfc8785` library's text, or its refusal)
    whether the value takes the JSON encoder or the library."""
    try:
        expected = rfc8785.dumps(value).decode("utf-8")
    except Exception as error:  # noqa: BLE001 - the same refusal either way
        with pytest.raises(type(error)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


def test_id2_canonical_json_edges_match_rfc8785():
    """ID-2: control characters, quotes, keys beyond the BMP sorted by UTF-16, the
    2^53 boundary, a lone surrogate refused."""
    values = [
        {"b": "\x00\x01\x1f\x7f\b\f\n\r\t\"\\ \u2028 é 😀", "a": [True, False, None, 2**53 - 1, -(2**53 - 1)]},
        {"\U0001f600": 1, "\ufb01": 2, "z": 3},
        [1.0, 1e21, 0.1],
    ]
    for value in values:
        assert canonical_json(value) == rfc8785.dumps(value).decode("utf-8")
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json({"s": "\ud800"})
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json({"n": 2**53})
