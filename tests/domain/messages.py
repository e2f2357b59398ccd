"""What a refusal's message for people must look like (ApiError: "a sentence that tells
the user what happened and what to do")."""


def assert_sentences(message: str) -> None:
    """Whole sentences: each starts with a capitalised word and the last ends with a full stop."""
    assert message.endswith("."), message
    for sentence in message[:-1].split(". "):
        first = sentence.split()[0]
        assert first.istitle() or first in {"A", "I"}, (first, message)
