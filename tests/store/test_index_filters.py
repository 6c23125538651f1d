"""The search index's filter indices (app/store/index.py): bitmap indices on the columns every
query filters by, made for a new table and added to a table of an older build at its next open."""

from __future__ import annotations

from pathlib import Path

import lancedb

from app.llm.fakes import HashEmbedder
from app.store.index import SearchIndex
from app.store.index_table import FILTERED, TABLE_NAME
from app.store.search_rows import SearchRow


def _columns(index_dir: Path) -> set[tuple[str, ...]]:
    table = lancedb.connect(str(index_dir)).open_table(TABLE_NAME)
    return {tuple(ix.columns) for ix in table.list_indices()}


def _rows(session: str, n: int) -> list[SearchRow]:
    return [SearchRow(id=f"{session}-{i}", session_id=session, kind="message" if i % 3 else "env",
                      text=f"the parser moved to step {i}", at=f"2026-01-01T00:00:{i:02d}") for i in range(n)]


def test_a_new_table_has_bitmap_indices_on_the_filtered_columns(tmp_path: Path) -> None:
    SearchIndex(tmp_path, HashEmbedder())
    assert {(c,) for c in FILTERED} | {("text",)} <= _columns(tmp_path)


def test_an_older_table_gets_them_at_its_next_open_and_filtered_queries_keep_their_rows(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path, HashEmbedder(), optimize_every=10_000)
    index.add(_rows("a", 30) + _rows("b", 30))
    table = lancedb.connect(str(tmp_path)).open_table(TABLE_NAME)
    for column in FILTERED:  # as a table of an older build was
        table.drop_index(f"{column}_idx")
    assert not {(c,) for c in FILTERED} & _columns(tmp_path)
    before = index.search_text("parser", 100, session_id="a", kinds=["message"])
    again = SearchIndex(tmp_path, HashEmbedder())
    assert {(c,) for c in FILTERED} <= _columns(tmp_path)
    after = again.search_text("parser", 100, session_id="a", kinds=["message"])
    assert sorted(after) == sorted(before) and len(after) == 20
    assert all(i.startswith("a-") for i, _ in after)
    again.add(_rows("c", 6))  # appended after the indices were built: found, and filtered
    assert {i for i, _ in again.search_text("parser", 100, session_id="c", kinds=["env"])} == {"c-0", "c-3"}
