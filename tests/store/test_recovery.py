"""Unfinished turns in the store: run leases, answer checkpoints, interrupted turns; opening a
fresh folder from several openers at once; an interrupted index rebuild.

A "dead" run is simulated by giving up its lease without finishing its turns (what the operating
system does to a killed process's locks); the SIGKILL drills (``test_crash_drill.py``) kill real
processes.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import lancedb
import pytest

from app.core.ports import CancelToken
from app.core.types import Message, Role
from app.llm.fakes import HashEmbedder
from app.store import migrations
from app.store.index import SearchIndex
from app.store.index_table import REBUILD_MARKER, TABLE_NAME
from app.locks import FileLock, LockTimeout, held_elsewhere
from app.store.sqlite import SqliteStore
from tests.store.helpers import populate


def _building(store: SqliteStore, text: str = "a question") -> str:
    sid = store.create_session()
    turn_id, _ = store.record_user_input(sid, text)
    store.update_turn(turn_id, status="building", record={"turn_id": turn_id})
    return turn_id


# ------------------------------------------------------------------ locks and leases


def test_file_lock_excludes_other_holders_and_reports_liveness(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    assert not held_elsewhere(path) and not path.exists()  # probing never creates the file
    first = FileLock(path)
    assert first.try_acquire() and first.held
    second = FileLock(path, timeout=0.1, what="testing")
    assert not second.try_acquire()
    assert held_elsewhere(path)
    with pytest.raises(LockTimeout, match="another process to finish testing"):
        second.acquire()
    first.release()
    assert not held_elsewhere(path)
    with second:
        assert held_elsewhere(path)


def test_a_store_holds_a_lease_while_open_and_gives_it_up_on_close(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "pcm.sqlite3")
    store.list_sessions()  # opens
    lease = tmp_path / "runs" / f"{store.run_id}.lock"
    assert lease.exists() and held_elsewhere(lease)
    assert not list((tmp_path / "runs").glob("*.tmp"))  # locked first, then given its name
    store.close()
    assert not lease.exists()


def test_sweep_removes_only_the_leases_of_dead_runs(tmp_path: Path) -> None:
    alive, dead, sweeper = (SqliteStore(tmp_path / "pcm.sqlite3") for _ in range(3))
    for store in (alive, dead, sweeper):
        store.list_sessions()
    dead.lease._lock.release()  # type: ignore[union-attr]  # the OS drops a killed process's locks
    assert sweeper.sweep_runs() == 1
    names = {p.stem for p in (tmp_path / "runs").iterdir()}
    assert names == {alive.run_id, sweeper.run_id}
    for store in (alive, sweeper):
        store.close()


# ------------------------------------------------------------------ checkpoints and interrupted turns


def test_checkpoints_move_the_turn_to_streaming_and_go_with_the_answer(store: SqliteStore) -> None:
    turn_id = _building(store)
    assert store.save_answer_checkpoint(turn_id, "Part", 1)
    assert store.save_answer_checkpoint(turn_id, "Partial ans", 3)
    assert store.get_turn(turn_id)["status"] == "streaming"  # type: ignore[index]
    assert store.answer_checkpoint(turn_id)["text"] == "Partial ans"  # type: ignore[index]
    logged = [e["type"] for e in store.list_events(None) if e["payload"].get("turn_id") == turn_id]
    assert logged.count("turn.streaming") == 1  # the checkpoints themselves are not events
    store.set_turn_answer(turn_id, Message(role=Role.ASSISTANT, content="Partial answer."))
    store.update_turn(turn_id, status="answered")
    assert store.answer_checkpoint(turn_id) is None
    assert not store.save_answer_checkpoint(turn_id, "late", 9)  # a finished turn is left alone
    assert store.answer_checkpoint(turn_id) is None


def test_only_the_turns_of_dead_runs_are_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "pcm.sqlite3"
    crashed, live, opener = SqliteStore(db), SqliteStore(db), SqliteStore(db)
    gone = _building(crashed, "killed mid-build")
    streaming = _building(crashed, "killed mid-answer")
    crashed.save_answer_checkpoint(streaming, "What I said so", 4)
    sid = crashed.create_session()
    recorded, _ = crashed.record_user_input(sid, "killed before its build")
    answering = _building(live, "another process answers this now")
    mine = _building(opener, "this store's own")
    crashed.lease._lock.release()  # type: ignore[union-attr]  # killed: its lock is gone, its turns stay
    found = {t["turn_id"]: t for t in opener.interrupted_turns()}
    assert set(found) == {gone, streaming, recorded}  # not the live process's, not its own
    assert found[streaming]["checkpoint"]["text"] == "What I said so"
    assert found[recorded]["input_text"] == "killed before its build" and found[gone]["checkpoint"] is None
    answer = Message(role=Role.ASSISTANT, content="What I said so")
    assert opener.interrupt_turn(streaming, answer=answer, record={"finish_reason": "interrupted"})
    assert not live.interrupt_turn(streaming)  # a second recovery (another process) does nothing
    turn = opener.get_turn(streaming)
    assert turn["status"] == "interrupted" and turn["answer_message_id"] == answer.message_id  # type: ignore[index]
    assert opener.get_message(answer.message_id).turn_id == streaming  # type: ignore[union-attr]
    assert opener.answer_checkpoint(streaming) is None
    for turn_id in (gone, recorded):
        assert opener.interrupt_turn(turn_id)
    assert opener.interrupted_turns() == []
    assert opener.turn_statuses(sid) == {recorded: "interrupted"}
    assert {live.get_turn(t)["status"] for t in (answering, mine)} == {"building"}  # type: ignore[index]
    for store in (live, opener):
        store.close()


# ------------------------------------------------------------------ opening a fresh folder at once


def test_a_migration_is_not_applied_twice_by_a_racing_opener(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    first = SqliteStore(tmp_path / "pcm.sqlite3")
    first.list_sessions()  # migrated
    # The second opener read the applied names before the first committed them.
    monkeypatch.setattr(migrations, "applied_migrations", lambda conn: [])
    conn = sqlite3.connect(tmp_path / "pcm.sqlite3", isolation_level=None)
    assert migrations.apply_migrations(conn) == []
    conn.close()
    first.close()


def test_openers_racing_on_a_fresh_folder_all_succeed(tmp_path: Path) -> None:
    """Threads stand in for processes here (each has its own connection and file locks);
    ``test_crash_drill.py`` races real processes."""
    errors: list[BaseException] = []
    recorded: list[str] = []
    start = threading.Barrier(6)

    def open_and_record(n: int) -> None:
        try:
            start.wait()
            store = SqliteStore(tmp_path / "pcm.sqlite3")
            index = SearchIndex(tmp_path / "index.lance", HashEmbedder(dim=32))
            sid = store.create_session(f"opener {n}")
            _, message = store.record_user_input(sid, f"question from opener {n}")
            index.index_messages(sid, [message])
            recorded.append(message.message_id)
            store.close()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=open_and_record, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(recorded) == 6
    assert SearchIndex(tmp_path / "index.lance", HashEmbedder(dim=32)).ids() == set(recorded)


# ------------------------------------------------------------------ the index after a crash


def test_a_table_left_without_its_full_text_index_gets_it_at_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    index = SearchIndex(path, HashEmbedder(dim=32))
    schema = index._schema()
    db = lancedb.connect(str(path))
    db.drop_table(TABLE_NAME)
    db.create_table(TABLE_NAME, schema=schema)  # killed between the table and its index
    reopened = SearchIndex(path, HashEmbedder(dim=32))
    reopened.add([])
    store = SqliteStore(tmp_path / "pcm.sqlite3")
    populate(store)
    reopened.reconcile(store)
    assert reopened.search_text("renew subscription", k=2)
    store.close()


def test_an_interrupted_rebuild_is_marked_until_it_is_finished(store: SqliteStore, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "idx"
    index = SearchIndex(path, HashEmbedder(dim=32), batch_size=2)
    cancel = CancelToken()
    index.rebuild_from(store, on_progress=lambda d, t: cancel.cancel(), cancel=cancel)  # stops as a kill would
    assert (path / REBUILD_MARKER).exists()
    reopened = SearchIndex(path, HashEmbedder(dim=32))  # the next run sees it
    assert reopened.needs_rebuild and reopened.count() == 2
    assert reopened.finish_rebuild(store.list_searchable()) == 7
    assert not reopened.needs_rebuild and not (path / REBUILD_MARKER).exists()
    assert reopened.ids() == {row.id for row in store.list_searchable()}
    assert reopened.finish_rebuild(store.list_searchable()) == 0  # nothing pending: a no-op


def test_finishing_waits_for_a_rebuild_another_process_is_running(store: SqliteStore, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "idx"
    index = SearchIndex(path, HashEmbedder(dim=32))
    (path / REBUILD_MARKER).write_text("{}")
    other = FileLock(path / ".rebuild.lock")
    assert other.try_acquire()  # "another process" rebuilds
    done: list[int] = []
    rows = store.list_searchable()
    waiter = threading.Thread(target=lambda: done.append(index.reconcile_rows(rows)))
    waiter.start()
    waiter.join(timeout=0.5)
    assert waiter.is_alive() and not done  # the index is not used half-built
    other.release()
    waiter.join(timeout=30)
    assert done == [9] and not index.needs_rebuild


def test_reconcile_without_ids_read_first_never_drops_rows_written_meanwhile(store: SqliteStore,
                                                                           index: SearchIndex) -> None:
    sid = populate(store).session_id
    index.rebuild_from(store)
    rows = store.list_searchable()  # read before another process commits and indexes a row
    _, late = store.record_user_input(sid, "written by another process meanwhile")
    index.index_messages(sid, [late])
    assert index.reconcile_rows(rows) == 0
    assert late.message_id in index.ids()


def test_an_open_index_keeps_working_after_another_process_rebuilt_it(store: SqliteStore, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "idx"
    live = SearchIndex(path, HashEmbedder(dim=32))  # the window, say
    live.rebuild_from(store)
    SearchIndex(path, HashEmbedder(dim=32)).rebuild_from(store)  # `pcm store rebuild-index` meanwhile
    assert live.search_vector("renew the subscription", k=2)  # its old files are gone: reopened
    assert live.search_text("renew subscription", k=2)
    sid = store.create_session()
    _, message = store.record_user_input(sid, "written after the rebuild")
    assert live.index_messages(sid, [message]) == 1
    assert live.ids() == {row.id for row in store.list_searchable()}


def test_a_rebuild_killed_while_it_dropped_the_table_is_finished_from_scratch(store: SqliteStore,
                                                                             tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "idx"
    SearchIndex(path, HashEmbedder(dim=32)).rebuild_from(store)
    (path / REBUILD_MARKER).write_text("{}")  # the rebuild started, and was killed in drop_table:
    shutil.rmtree(path / f"{TABLE_NAME}.lance" / "data")  # the manifests still name deleted files
    reopened = SearchIndex(path, HashEmbedder(dim=32))
    assert reopened.needs_rebuild
    assert reopened.finish_rebuild(store.list_searchable()) == 9
    assert reopened.ids() == {row.id for row in store.list_searchable()} and not reopened.needs_rebuild
    assert reopened.search_text("renew subscription", k=2)


def test_an_index_that_cannot_be_opened_is_started_over(store: SqliteStore, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "idx"
    SearchIndex(path, HashEmbedder(dim=32)).rebuild_from(store)
    shutil.rmtree(path / f"{TABLE_NAME}.lance" / "_versions")  # no manifest left: not a table
    reopened = SearchIndex(path, HashEmbedder(dim=32))
    assert reopened.needs_rebuild and reopened.count() == 0  # rebuildable from SQLite: nothing lost
    assert reopened.reconcile(store) == 9 and not reopened.needs_rebuild


def test_the_searchable_ids_and_rows_by_id_match_the_full_list(store: SqliteStore) -> None:
    populate(store)
    every = store.list_searchable()
    assert store.searchable_ids() == {row.id for row in every}
    some = [every[-1].id, every[0].id, every[3].id, "no-such-id"]
    assert store.list_searchable(some) == [row for row in every if row.id in some]  # kept in order
    assert store.list_searchable([]) == []
