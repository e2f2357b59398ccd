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
