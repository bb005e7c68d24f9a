"""firebase_admin.db.Reference against hearth: reads, writes, ETags and transactions."""

import json
import threading
import urllib.request

import pytest
from firebase_admin import db, exceptions


def test_set_and_get(root):
    ref = root.child("users/ada")
    ref.set({"name": "Ada", "born": 1815, "ratio": 1.0, "tags": ["math", "engines"]})
    value = ref.get()
    assert value == {"name": "Ada", "born": 1815, "ratio": 1, "tags": ["math", "engines"]}
    # Integral numbers come back without ".0", as production writes them.
    assert type(value["ratio"]) is int
    assert root.child("users/ada/name").get() == "Ada"
    assert root.child("nobody").get() is None


def test_push_creates_ordered_children(root):
    messages = root.child("messages")
    first = messages.push({"text": "one"})
    second = messages.push({"text": "two"})
    empty = messages.push()
    assert len(first.key) == 20 and first.key < second.key < empty.key
    assert messages.child(first.key).get() == {"text": "one"}
    assert messages.child(empty.key).get() == ""
    assert list(messages.get().keys()) == [first.key, second.key, empty.key]


def test_update_is_a_multi_path_update(root):
    ref = root.child("profile")
    ref.set({"a": 1, "b": {"c": 2, "d": 3}})
    ref.update({"a": None, "b/c": 20, "e": {"f": "g"}})
    assert ref.get() == {"b": {"c": 20, "d": 3}, "e": {"f": "g"}}


def test_delete(root):
    ref = root.child("gone")
    ref.set({"x": 1})
    ref.delete()
    assert ref.get() is None
    # Deleting what does not exist is fine.
    ref.delete()


def test_shallow_get(root):
    root.child("shallow").set({"a": {"deep": 1}, "b": 2})
    assert root.child("shallow").get(shallow=True) == {"a": True, "b": True}


def test_get_with_etag_and_set_if_unchanged(root):
    ref = root.child("guarded")
    value, etag = ref.get(etag=True)
    assert value is None and etag == "null_etag"
    ok, value, etag1 = ref.set_if_unchanged(etag, {"v": 1})
    assert ok and value == {"v": 1}
    # The hash of {"v": 1}, as every Firebase client computes it.
    assert etag1 == "LjeXjzTaaVqwN8qlkUuwnS01bqc="
    ok, current, etag2 = ref.set_if_unchanged("null_etag", {"v": 2})
    assert not ok
    assert current == {"v": 1} and etag2 == etag1
    assert ref.get(etag=True) == ({"v": 1}, etag1)


def test_get_if_changed(root):
    ref = root.child("watched")
    ref.set([1, 2, 3])
    value, etag = ref.get(etag=True)
    assert value == [1, 2, 3]
    assert ref.get_if_changed(etag) == (False, None, None)
    ref.child("3").set(4)
    changed, value, new_etag = ref.get_if_changed(etag)
    assert changed and value == [1, 2, 3, 4] and new_etag != etag


def test_transaction(root):
    ref = root.child("account")
    ref.set({"balance": 10})
    result = ref.transaction(lambda current: {"balance": current["balance"] + 5})
    assert result == {"balance": 15}
    assert ref.get() == {"balance": 15}


def test_transaction_from_two_threads_counts_every_increment(root):
    counter = root.child("counter")
    per_thread = 25
    errors = []

    def work():
        try:
            for _ in range(per_thread):
                counter.transaction(lambda current: (current or 0) + 1)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert counter.get() == 2 * per_thread


def test_priorities_are_written_but_not_read_back(server, namespace, root):
    root.child("ranked").set({"a": {".value": 1, ".priority": 5}, "b": 2})
    assert root.child("ranked").get() == {"a": 1, "b": 2}
    # The export format (not used by the SDK) keeps them.
    with urllib.request.urlopen(server.url(namespace, "ranked") + "&format=export") as response:
        assert json.load(response) == {"a": {".value": 1, ".priority": 5}, "b": 2}


def test_server_values(root):
    ref = root.child("stamped")
    ref.set({"at": {".sv": "timestamp"}, "n": 1})
    ref.update({"n": {".sv": {"increment": 41}}})
    value = ref.get()
    assert isinstance(value["at"], int) and value["at"] > 1_600_000_000_000
    assert value["n"] == 42


def test_invalid_data_is_a_400(root):
    with pytest.raises(exceptions.InvalidArgumentError):
        root.child("bad").set({"a.b": 1})
    with pytest.raises(exceptions.InvalidArgumentError):
        root.child("bad").set({"x": {".value": 1, "y": 2}})
    assert root.child("bad").get() is None


def test_auth_variable_override(app_factory, root):
    as_user = app_factory(databaseAuthVariableOverride={"uid": "alice"})
    as_nobody = app_factory(databaseAuthVariableOverride=None)
    db.reference("/who", app=as_user).set("alice was here")
    assert db.reference("/who", app=as_nobody).get() == "alice was here"
    assert root.child("who").get() == "alice was here"
