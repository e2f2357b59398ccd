"""A bulk retry of dead letters goes ahead only on the exact list the operator saw (CONN-4)."""

import pytest

from app.domain.dead_letters import LIST_CHANGED, NOT_LISTED, NOTHING_SELECTED, bulk_refusal, list_digest
from .messages import assert_sentences

LISTED = [("p2", 1), ("p1", 3)]


def test_conn4_the_list_digest_ignores_order_but_not_the_delivery_cycle():
    """CONN-4: the same proposals in another order are the same list; a proposal retried
    and failed again (a new cycle) is a changed list, though its id is the same."""
    assert list_digest(LISTED) == list_digest(reversed(LISTED))
    assert list_digest(LISTED).startswith("sha256:")
    assert list_digest(LISTED) != list_digest([("p2", 1), ("p1", 4)])
    assert list_digest(LISTED) != list_digest([("p2", 1)])
    assert list_digest([]) != list_digest([("p1", 1)])


@pytest.mark.parametrize("selected", [None, ["p1"], ["p1", "p2"]])
def test_conn4_a_retry_of_the_list_shown_goes_ahead(selected):
    """CONN-4: all listed (None) or some of them, with the digest of the page shown."""
    assert bulk_refusal(LISTED, list_digest(LISTED), selected) is None


@pytest.mark.parametrize("selected", [None, ["p1"]])
def test_conn4_a_changed_list_retries_nothing(selected):
    """CONN-4: the digest of another list (a new failure, a new cycle) refuses the retry."""
    code, message = bulk_refusal(LISTED + [("p3", 1)], list_digest(LISTED), selected)
    assert code == LIST_CHANGED == "dead_letters_changed"
    assert "Nothing was retried" in message
    assert_sentences(message)


def test_conn4_an_empty_selection_is_refused_not_read_as_all():
    """CONN-4: ticking nothing is not 'retry everything'."""
    code, message = bulk_refusal(LISTED, list_digest(LISTED), [])
    assert code == NOTHING_SELECTED == "dead_letters_none_selected"
    assert "Tick at least one" in message
    assert_sentences(message)


@pytest.mark.parametrize("selected", [["p9"], ["p1", "p9"], ["1"]])
def test_conn4_a_selected_proposal_not_listed_retries_nothing(selected):
    """CONN-4: an id the page did not list (even beside listed ones) refuses the whole retry."""
    code, message = bulk_refusal(LISTED, list_digest(LISTED), selected)
    assert code == NOT_LISTED == "dead_letter_not_listed"
    assert "Nothing was retried" in message
    assert_sentences(message)
