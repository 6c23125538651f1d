"""The sessions list as a person uses it (``app/store/catalog.py``): archive hides and never
deletes, undo brings back, search looks at titles and messages with wildcards taken literally,
the last used session is the one opened last, and only an untitled session gets a title."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.types import Message, Role
from app.store.connection import NotFoundError
from app.store.sqlite import SqliteStore


@pytest.fixture
def store(tmp_path: Path):
    s = SqliteStore(tmp_path / "pcm.sqlite3")
    yield s
    s.close()


def test_archive_hides_a_session_keeps_its_data_and_undo_brings_it_back(store: SqliteStore) -> None:
    a, b = store.create_session("Kyoto trip"), store.create_session("Sales report")
    store.add_message(a, Message(role=Role.USER, content="Book the ryokan"))
    store.set_session_archived(a, True)
    assert [r["session_id"] for r in store.list_sessions()] == [b]
    everything = {r["session_id"]: r for r in store.list_sessions(archived=True)}
    assert everything[a]["archived_at"] and everything[a]["message_count"] == 1
    assert everything[b]["archived_at"] is None
    assert store.list_messages(a)[0].content == "Book the ryokan"  # nothing deleted
    store.set_session_archived(a, False)
    assert [r["session_id"] for r in store.list_sessions()] == [a, b]
    types = [row[0] for row in store._db().execute(
        "SELECT type FROM event_log WHERE session_id = ? ORDER BY seq", (a,))]
    assert types[-2:] == ["session.archived", "session.unarchived"]
    with pytest.raises(NotFoundError):
        store.set_session_archived("nope", True)


def test_search_finds_titles_and_messages_in_any_case_and_takes_wildcards_literally(store: SqliteStore) -> None:
    a, b, c = store.create_session("Kyoto trip"), store.create_session("Python error"), store.create_session("")
    store.add_message(b, Message(role=Role.USER, content="TypeError in my_list[0] after 100% of the loop"))
    store.add_message(c, Message(role=Role.USER, content="Sales for Kyoto stores"))
    assert store.search_sessions("kyoto") == [a, c]
    assert store.search_sessions("TYPEERROR") == [b]
    assert store.search_sessions("100%") == [b] and store.search_sessions("my_list") == [b]
    assert store.search_sessions("%") == [b] and store.search_sessions("_") == [b]
    assert store.search_sessions("nothing like it") == []
    store.set_session_archived(c, True)
    assert store.search_sessions("kyoto") == [a]
    assert store.search_sessions("kyoto", archived=True) == [a, c]


def test_the_last_used_session_is_the_one_opened_last_and_never_an_archived_one(store: SqliteStore) -> None:
    assert store.last_used_session_id() is None
    a, b = store.create_session("A"), store.create_session("B")
    assert store.last_used_session_id() == b  # none opened yet: the latest created
    store.add_turn(a, "t1", store.add_message(a, Message(role=Role.USER, content="hi")).message_id)
    assert store.last_used_session_id() == a  # the session of the latest turn
    store.mark_session_opened(b)
    store.mark_session_opened(a)
    store.mark_session_opened(b)
    assert store.last_used_session_id() == b
    store.set_session_archived(b, True)
    assert store.last_used_session_id() == a
    with pytest.raises(NotFoundError):
        store.mark_session_opened("nope")


def test_only_an_untitled_session_is_named_by_its_first_input(store: SqliteStore) -> None:
    untitled, named = store.create_session(""), store.create_session("Mine")
    assert store.title_untitled_session(untitled, "Plan the Kyoto trip")
    assert not store.title_untitled_session(untitled, "Something else")
    assert not store.title_untitled_session(named, "Plan the Kyoto trip")
    assert not store.title_untitled_session(store.create_session(""), "")
    titles = {r["session_id"]: r["title"] for r in store.list_sessions()}
    assert titles[untitled] == "Plan the Kyoto trip" and titles[named] == "Mine"
