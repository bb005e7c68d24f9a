"""firebase_admin.db.Query against hearth: every order, with ranges and limits."""

import pytest
from firebase_admin import exceptions

PEOPLE = {
    "ada": {"age": 36, "name": "Ada"},
    "bob": {"age": 17, "name": "Bob"},
    "cy": {"age": 52, "name": "Cy"},
    "dee": {"age": "unknown", "name": "Dee"},
    "eve": {"name": "Eve"},
    "fay": {"age": 36, "name": "Fay"},
}

SCORES = {"a": 5, "b": 1, "c": 9, "d": 1, "e": True, "f": "x"}


@pytest.fixture
def people(root):
    ref = root.child("people")
    ref.set(PEOPLE)
    return ref


@pytest.fixture
def scores(root):
    ref = root.child("scores")
    ref.set(SCORES)
    return ref


def test_order_by_child_with_range_and_limit(people):
    # The exact request of spec §15.7.
    result = people.order_by_child("age").start_at(5).end_at("z").limit_to_first(3).get()
    assert list(result.keys()) == ["bob", "ada", "fay"]
    assert result["bob"] == {"age": 17, "name": "Bob"}


def test_order_by_child_ranges(people):
    assert list(people.order_by_child("age").start_at(36).get()) == ["ada", "fay", "cy", "dee"]
    assert list(people.order_by_child("age").end_at(36).get()) == ["eve", "bob", "ada", "fay"]
    assert list(people.order_by_child("age").equal_to(36).get()) == ["ada", "fay"]
    assert list(people.order_by_child("age").limit_to_last(2).get()) == ["cy", "dee"]
    assert list(people.order_by_child("name").equal_to("Eve").get()) == ["eve"]


def test_order_by_key(people):
    assert list(people.order_by_key().start_at("b").end_at("d").get()) == ["bob", "cy"]
    assert list(people.order_by_key().limit_to_first(2).get()) == ["ada", "bob"]
    assert list(people.order_by_key().limit_to_last(2).get()) == ["eve", "fay"]


def test_order_by_value(scores):
    assert list(scores.order_by_value().start_at(1).end_at(5).get()) == ["b", "d", "a"]
    assert list(scores.order_by_value().limit_to_last(2).get()) == ["c", "f"]
    assert list(scores.order_by_value().limit_to_first(1).get()) == ["e"]
    assert list(scores.order_by_value().equal_to(1).get()) == ["b", "d"]


def test_queries_on_nested_child_paths(root):
    ref = root.child("nested")
    ref.set({"x": {"stats": {"score": 3}}, "y": {"stats": {"score": 1}}, "z": {"stats": {"score": 2}}})
    assert list(ref.order_by_child("stats/score").limit_to_first(2).get()) == ["y", "z"]


def test_limit_zero_and_empty_results(people):
    assert people.order_by_key().limit_to_first(0).get() is None
    assert people.order_by_child("age").start_at(1000).end_at(2000).get() is None


def test_bad_query_is_a_400(root):
    # The SDK checks little itself; the server refuses what it cannot serve.
    with pytest.raises(exceptions.InvalidArgumentError) as refused:
        root.child("people").order_by_key().limit_to_first(10**7).get()
    assert "limitToFirst" in str(refused.value)
    with pytest.raises(exceptions.InvalidArgumentError):
        root.child("people").order_by_child("bad\u0001path").get()
