"""SearchIndex on a real LanceDB: vector and full-text search, rebuild, reconcile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.core.ports import CancelToken
from app.core.types import EnvEvent, MemoryFragment, Message, Role
from app.llm.fakes import HashEmbedder
from app.store.index import SearchIndex
from app.store.search_rows import SearchRow, message_row
from app.store.sqlite import SqliteStore
from tests.store.helpers import populate

TEXTS = {
    "m-renew": "How do I renew the subscription through the billing API?",
    "m-weather": "The weather in Lisbon is sunny and warm today.",
    "m-quote": "O'Reilly wrote about \"quoted\" (parenthesised) text: a:b",
    "mem-tea": "The user likes green tea in the afternoon.",
    "env-quota": "quota.md changed: the API quota resets on the first of each month.",
}


def _rows() -> list[SearchRow]:
    kinds = {"m": "message", "mem": "memory", "env": "env"}
    return [SearchRow(id=key, session_id="s2" if key == "m-weather" else "s1",
                      kind=kinds[key.split("-")[0]], text=text,  # type: ignore[arg-type]
                      at="2026-01-01T00:00:00Z")
            for key, text in TEXTS.items()]


def test_search_vector_and_text_find_the_right_rows(index: SearchIndex) -> None:
    assert index.add(_rows()) == 5
    assert index.count() == 5 and index.ids() == set(TEXTS)
    hits = index.search_vector("renew the subscription billing API", k=3)
    assert hits[0][0] == "m-renew" and hits[0][1] > hits[1][1]
    assert index.search_text("subscription", k=5)[0][0] == "m-renew"
    assert [i for i, _ in index.search_text("tea", k=5)] == ["mem-tea"]
    # Filters: by session and by kind (prefiltered, so k is filled from the matching rows).
    assert {i for i, _ in index.search_vector("weather", k=10, session_id="s2")} == {"m-weather"}
    assert {i for i, _ in index.search_text("quota API", k=10, kinds=["env"])} == {"env-quota"}
    assert {i for i, _ in index.search_text("API", k=10, kinds=["message"])} == {"m-renew"}
    assert index.search_text("API", k=10, kinds=[]) == []
    # Odd characters in queries and quotes in filter values are harmless.
    assert [i for i, _ in index.search_text("O'Reilly \"quoted\"", k=3)][0] == "m-quote"
    assert index.search_vector("x", k=5, session_id="s1' OR '1'='1") == []
    assert index.search_text("   ", k=5) == []
    with pytest.raises(ValueError, match="unknown search kinds"):
        index.search_text("API", kinds=["bogus"])
    # A raw vector works too, and must have the embedder's dimension.
    vector = HashEmbedder(dim=64).embed([TEXTS["mem-tea"]])[0]
    assert index.search_vector(vector, k=1)[0][0] == "mem-tea"
    with pytest.raises(ValueError, match="shape"):
        index.search_vector([0.1, 0.2], k=1)


def test_rows_added_after_the_fts_index_are_searchable(index: SearchIndex) -> None:
    index.add(_rows()[:2])
    index.optimize()  # everything so far is in the FTS index
    index.add([SearchRow("late", "s1", "message", "a late zebra appears", "2026")])
    assert [i for i, _ in index.search_text("zebra", k=3)] == ["late"]
    # Re-adding an id replaces its row instead of duplicating it.
    index.add([SearchRow("late", "s1", "message", "a late giraffe appears", "2026")])
    assert index.count() == 3
    assert index.search_text("zebra", k=3) == []
    assert [i for i, _ in index.search_text("giraffe", k=3)] == ["late"]


def test_optimize_every_folds_rows_into_the_index(tmp_path: Path, embedder: HashEmbedder) -> None:
    index = SearchIndex(tmp_path / "idx", embedder, batch_size=4, optimize_every=6)
    progress: list[tuple[int, int]] = []
    rows = [SearchRow(f"r{i}", "s", "message", f"row number {i} token{i}", "t") for i in range(10)]
    assert index.add(rows, on_progress=lambda d, t: progress.append((d, t))) == 10
    assert progress == [(4, 10), (8, 10), (10, 10)]
    assert index._unoptimized == 0  # noqa: SLF001 - the threshold triggered optimize()
    assert [i for i, _ in index.search_text("token7", k=3)] == ["r7"]


def test_rows_are_embedded_a_batch_at_a_time_and_written_several_batches_at_a_time(
        tmp_path: Path, embedder: HashEmbedder) -> None:
    index = SearchIndex(tmp_path / "idx", embedder, batch_size=2, write_size=4, optimize_every=1000)
    versions = [index._lance.table.version]  # noqa: SLF001 - a write is a table version
    progress: list[tuple[int, int]] = []
    rows = [SearchRow(f"r{i}", "s", "message", f"row number {i} token{i}", "t") for i in range(9)]
    def seen(done: int, total: int) -> None:
        progress.append((done, total))
        versions.append(index._lance.table.version)  # noqa: SLF001

    assert index.add(rows, on_progress=seen) == 9
    assert progress == [(2, 9), (4, 9), (6, 9), (8, 9), (9, 9)]  # after every embedding batch
    assert [v - versions[0] for v in versions] == [0, 0, 1, 1, 2, 3]  # one upsert per 4 rows, the rest at the end
    assert index.ids() == {r.id for r in rows}
    # an upsert: a row written again replaces its text, and the count stays
    assert index.add([SearchRow("r3", "s", "message", "a giraffe instead", "t")]) == 1
    assert index.count() == 9 and [i for i, _ in index.search_text("giraffe", k=3)] == ["r3"]


def test_a_write_window_is_embedded_longest_first_in_batches_of_like_length_and_written_in_order(
        tmp_path: Path, embedder: HashEmbedder) -> None:
    """The embedder pads a batch to its longest text: rows arriving short, long, short, long... are
    embedded in batches of one length, and the table still gets them in the order given."""
    index = SearchIndex(tmp_path / "idx", embedder, batch_size=2, write_size=4, optimize_every=1000)
    calls: list[list[str]] = []
    original = embedder.embed

    def spy(texts, *, batch_size=64):  # type: ignore[no-untyped-def]
        calls.append(list(texts))
        return original(texts, batch_size=batch_size)

    embedder.embed = spy  # type: ignore[method-assign]
    texts = ["short", "a much longer text than the others", "tiny", "another much longer text here"] * 2
    rows = [SearchRow(f"r{i}", "s", "message", f"{t} {i}", "t") for i, t in enumerate(texts)]
    progress: list[tuple[int, int]] = []
    assert index.add(rows, on_progress=lambda d, t: progress.append((d, t))) == 8
    assert progress == [(2, 8), (4, 8), (6, 8), (8, 8)]
    assert [sorted(len(t) > 10 for t in batch) for batch in calls] == [[True, True], [False, False]] * 2
    written = index._lance.table.to_arrow().column("id").to_pylist()  # noqa: SLF001 - the table's own order
    assert written == [r.id for r in rows]
    stored = index.vectors(r.id for r in rows)
    for row in rows:  # each row got its own text's vector
        assert np.allclose(stored[row.id], original([row.text])[0])


def test_a_cancelled_add_writes_what_was_embedded_the_longest_rows_of_its_window(
        tmp_path: Path, embedder: HashEmbedder) -> None:
    index = SearchIndex(tmp_path / "idx", embedder, batch_size=2, write_size=4, optimize_every=1000)
    cancel = CancelToken()
    rows = [SearchRow(f"r{i}", "s", "message", t, "t")
            for i, t in enumerate(["aa", "bbbbbbbbbbbb", "cc", "dddddddddddd", "eeeeeeeeeeeeeeee"])]
    assert index.add(rows, on_progress=lambda *_: cancel.cancel(), cancel=cancel) == 2
    assert index.ids() == {"r1", "r3"}  # the first batch of the window: its two longest texts


def test_rebuild_from_store_gives_the_same_ids(store: SqliteStore, index: SearchIndex) -> None:
    populated = populate(store)
    expected = {row.id for row in store.list_searchable()}
    progress: list[tuple[int, int]] = []
    assert index.rebuild_from(store, on_progress=lambda d, t: progress.append((d, t))) == 9
    assert index.ids() == expected and progress[-1] == (9, 9)
    assert populated.fragment_ids[0] not in expected  # superseded memory is not searchable
    before = index.search_vector(TEXTS["m-renew"], k=3)
    # Rebuilding again from scratch yields the same ids and the same rankings.
    assert index.rebuild_from(store) == 9
    assert index.ids() == expected
    assert index.search_vector(TEXTS["m-renew"], k=3) == before
    hits = index.search_text("renew subscription", k=3, session_id=populated.session_id)
    assert hits and store.get_message(hits[0][0]) is not None


def test_rebuild_can_be_cancelled_and_reconcile_finishes(store: SqliteStore,
                                                         tmp_path: Path) -> None:
    populate(store)
    index = SearchIndex(tmp_path / "idx", HashEmbedder(dim=32), batch_size=2)
    cancel = CancelToken()

    def stop_after_first(done: int, total: int) -> None:
        cancel.cancel()

    assert index.rebuild_from(store, on_progress=stop_after_first, cancel=cancel) == 2
    assert index.count() == 2 and index.needs_rebuild
    assert index.reconcile(store) == 7
    assert index.ids() == {row.id for row in store.list_searchable()}
    assert not index.needs_rebuild


def test_reconcile_embeds_exactly_the_missing_rows(store: SqliteStore,
                                                   index: SearchIndex) -> None:
    populated = populate(store)
    sid = populated.session_id
    index.rebuild_from(store)
    assert index.reconcile(store) == 0
    # Written to SQLite only (as after a crash between the commit and the index write).
    new_ids = [store.add_message(sid, Message(role=Role.USER, content=f"fresh note {i}")).message_id
               for i in range(4)]
    new_ids.append(store.add_memory(sid, MemoryFragment(content="prefers dark mode")).fragment_id)
    new_ids.append(store.add_env_event(sid, EnvEvent(kind="api", source="http://x",
                                                     title="status", content="green")).event_id)
    embedded: list[list[str]] = []
    original = index.embedder.embed

    def spy(texts, *, batch_size=64):  # type: ignore[no-untyped-def]
        embedded.append(list(texts))
        return original(texts, batch_size=batch_size)

    index.embedder.embed = spy  # type: ignore[method-assign]
    assert index.reconcile(store) == 6
    assert sorted(t for batch in embedded for t in batch) == sorted(
        [f"user: fresh note {i}" for i in range(4)] + ["prefers dark mode", "status\ngreen"])
    assert set(new_ids) <= index.ids() and index.count() == 15
    assert index.reconcile(store) == 0
    # Superseding a memory fragment drops it from the index at the next reconcile.
    store.supersede_memory(populated.fragment_ids[1])
    assert index.reconcile(store) == 0
    assert populated.fragment_ids[1] not in index.ids()
    assert store.list_memory(sid, include_superseded=True)[1].valid_to is not None


def test_embedder_change_forces_a_rebuild(store: SqliteStore, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "idx"
    first = SearchIndex(path, HashEmbedder(dim=64))
    first.rebuild_from(store)
    assert not SearchIndex(path, HashEmbedder(dim=64)).needs_rebuild  # same model: kept
    assert SearchIndex(path, HashEmbedder(dim=64)).count() == 9
    other_dim = SearchIndex(path, HashEmbedder(dim=48))
    assert other_dim.needs_rebuild and other_dim.count() == 0
    assert other_dim.reconcile(store) == 9 and not other_dim.needs_rebuild
    renamed = SearchIndex(path, HashEmbedder(dim=48, name="another-model"))
    assert renamed.needs_rebuild and renamed.count() == 0


def test_live_rows_match_rebuilt_rows(store: SqliteStore, index: SearchIndex) -> None:
    sid = store.create_session()
    _, message = store.record_user_input(sid, "index me live")
    index.add([message_row(sid, message)])
    assert index.reconcile(store) == 0  # the live row is exactly what a rebuild would write
    assert index.search_text("live", k=1)[0][0] == message.message_id
    with pytest.raises(ValueError, match="unknown kind"):
        index.add([SearchRow("x", sid, "bogus", "t", "a")])  # type: ignore[arg-type]


def test_a_date_range_is_pushed_into_the_index_query(index: SearchIndex) -> None:
    days = {"d1": "2026-03-01T09:00:00Z", "d2": "2026-03-02T09:00:00.123456Z", "d3": "2026-03-03T09:00:00Z"}
    index.add([SearchRow(i, "s1", "message", f"budget meeting notes {i}", at) for i, at in days.items()])
    # Prefiltered: the k best are taken among the rows in [since, until), not cut from the top k.
    assert {i for i, _ in index.search_text("budget", k=1, since="2026-03-02T00:00:00",
                                            until="2026-03-03T00:00:00")} == {"d2"}
    assert {i for i, _ in index.search_vector("budget meeting", k=5, since="2026-03-02T00:00:00")} == {"d2", "d3"}
    assert {i for i, _ in index.search_vector("budget meeting", k=5, until="2026-03-02T00:00:00")} == {"d1"}
    assert index.search_text("budget", k=5, since="2026-04-01T00:00:00") == []


def test_the_memory_search_held_in_process_answers_as_lancedb_does(index: SearchIndex) -> None:
    """The memory channel's search (every session's memories) is served from vectors held in the
    process; it gives LanceDB's own answer, within a date range too, and follows every write."""
    days = ["2026-03-01T09:00:00Z", "2026-03-02T09:00:00Z", "2026-03-03T09:00:00Z"]
    words = ["green tea in the afternoon", "the quarterly budget review", "a trip to Kyoto in spring",
             "the budget for the Kyoto trip", "tea ceremony in Kyoto", "afternoon budget meeting"]
    index.add([SearchRow(f"mem{n}", f"s{n % 2}", "memory", text, days[n % 3]) for n, text in enumerate(words)])
    index.add([SearchRow("m-budget", "s0", "message", "the budget again", days[0])])

    def lance(query: str, k: int, **dated: str) -> list[tuple[str, float]]:
        where = "kind IN ('memory')" + "".join(f" AND at {'>=' if key == 'since' else '<'} '{value}'"
                                               for key, value in dated.items())
        vector = index.embedder.embed([query])[0]
        rows = (index._lance.table.search(vector, vector_column_name="vector").distance_type("cosine")
                .select(["id", "_distance"]).limit(k).where(where, prefilter=True).to_list())
        return [(r["id"], 1.0 - float(r["_distance"])) for r in rows]

    def agree(query: str, k: int, **dated: str) -> list[str]:
        ours, theirs = index.search_vector(query, k, kinds=["memory"], **dated), lance(query, k, **dated)
        assert [i for i, _ in ours] == [i for i, _ in theirs]
        assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(ours, theirs))
        return [i for i, _ in ours]

    assert len(agree("budget", 10)) == 6  # every session's memories, no message
    assert agree("Kyoto tea", 3) and agree("budget", 2, since=days[1]) and agree("tea", 5, until=days[2])
    assert agree("budget", 5, since=days[2], until=days[2]) == []
    index.add([SearchRow("mem-new", "s3", "memory", "a budget spreadsheet", days[1])])
    assert "mem-new" in agree("budget spreadsheet", 3)  # a write moves the table's version: read again
    index.remove(["mem-new", "mem1"])
    assert not {"mem-new", "mem1"} & set(agree("budget spreadsheet", 10))
