"""The sealing primitive behind secrets at rest (SPEC OPS-3)."""

import pytest

from app.secret_box import SecretBox, SecretBoxError, box_from_texts, decode_key, is_sealed, new_key_text


def test_ops3_sealed_value_opens_only_in_its_own_column():
    box = box_from_texts(new_key_text())
    sealed = box.seal("tok-123", context="connection_versions.bearer_token")
    assert is_sealed(sealed) and "tok-123" not in sealed
    assert box.open(sealed, context="connection_versions.bearer_token") == "tok-123"
    with pytest.raises(SecretBoxError):
        box.open(sealed, context="connection_versions.signing_secret")


def test_ops3_rotation_keeps_previous_keys_readable_and_reseals_with_the_new_one():
    old, new = new_key_text(), new_key_text()
    sealed_old = box_from_texts(old).seal("s", context="c")
    rotated = box_from_texts(new, old)
    assert rotated.open(sealed_old, context="c") == "s"
    assert rotated.needs_reseal(sealed_old) and not rotated.needs_reseal(rotated.seal("s", context="c"))
    assert rotated.needs_reseal("plain text")
    with pytest.raises(SecretBoxError, match="not configured"):
        box_from_texts(new).open(sealed_old, context="c")


def test_ops3_a_key_of_the_wrong_shape_is_refused():
    with pytest.raises(SecretBoxError):
        decode_key("short")
    assert isinstance(SecretBox(decode_key(new_key_text())).seal("x", context="c"), str)
