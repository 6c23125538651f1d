"""Summary versions in SQLite: a version that extends the one it is based on is stored as its
extension, and every read gives the whole record back — also after a restart."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.memory.summaries import compose
from app.core.types import SummaryCovers, SummaryRecord
from app.store.sqlite import SqliteStore


def _chain(n: int, *, per_part: int = 32, composed: bool = False) -> list[SummaryRecord]:
    """``n`` versions of one subject's summary, each covering one more part, as the engine makes them
    (``composed``: the content is the parts composed, older ones coarser; else a line of its own)."""
    out: list[SummaryRecord] = []
    for k in range(n):
        previous = out[-1] if out else None
        new = [f"message-{k:04d}-{j:02d}-{'x' * 20}" for j in range(per_part)]
        ids = [*(previous.covers.ids if previous else []), *new]
        parts = [*(previous.parts if previous else []),
                 {"first": k * per_part, "last": (k + 1) * per_part - 1, "brief": f"part {k}", "standard": f"part {k} " * 20,
                  "detailed": f"part {k} in detail " * 20 + f"\nmore of part {k}"}]
        content = compose(parts, "detailed") if composed else f"summary {k}"
        out.append(SummaryRecord(subject="session", subject_id="s", level="detailed", content=content,
                                 covers=SummaryCovers(first=0, last=len(ids) - 1, ids=ids), parts=parts,
                                 based_on=previous.summary_id if previous else None, cache_key=f"key-{k}",
                                 created_at=f"2026-11-28T10:{k // 60:02d}:{k % 60:02d}Z"))
    return out


def _sizes(store: SqliteStore) -> list[int]:
    rows = store.db.connection().execute("SELECT length(data) FROM summaries ORDER BY seq")
    return [int(r[0]) for r in rows]


def _same(got: SummaryRecord | None, want: SummaryRecord) -> None:
    assert got is not None
    assert got.model_dump(exclude={"valid_to"}) == want.model_dump(exclude={"valid_to"})


def test_a_chain_of_versions_is_stored_as_extensions_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "pcm.sqlite3"
    store = SqliteStore(path)
    sid = store.create_session("long")
    chain = _chain(60)
    for record in chain[:40]:
        store.add_summary(sid, record)
    sizes = _sizes(store)
    assert max(sizes[1:]) < 2 * sizes[0]  # each row holds its own part, not the chain (whole: 40x the first)
    every = store.list_summaries(sid, current=False)
    assert len(every) == 40
    for got, want in zip(every, chain, strict=False):
        _same(got, want)
    assert [s.valid_to is None for s in every] == [False] * 39 + [True]
    _same(store.list_summaries(sid)[0], chain[39])
    _same(store.get_summary(chain[17].summary_id), chain[17])
    _same(store.summary_by_key("key-23"), chain[23])
    store.close()

    reopened = SqliteStore(path)  # nothing remembered in the process: the chain is read back
    _same(reopened.get_summary(chain[39].summary_id), chain[39])
    for record in chain[40:]:
        reopened.add_summary(sid, record)
    assert max(_sizes(reopened)[40:]) < 2 * sizes[0]
    _same(reopened.list_summaries(sid)[0], chain[-1])
    reopened.close()


def test_a_version_that_does_not_extend_its_base_is_stored_whole(store: SqliteStore) -> None:
    sid = store.create_session("rewritten")
    first, second = _chain(2)
    store.add_summary(sid, first)
    other = second.model_copy(update={"covers": SummaryCovers(first=0, last=1, ids=["a", "b"]), "parts": []})
    store.add_summary(sid, other)
    _same(store.get_summary(other.summary_id), other)
    _same(store.list_summaries(sid)[0], other)


def test_a_composed_content_is_stored_as_the_lines_after_those_it_keeps(tmp_path: Path) -> None:
    """Composing a new part in changes a summary's last lines only: each row holds those, not the
    whole content (which grows with the chain), and every version reads back exactly — in the
    process that wrote it and after a restart, through a chain of hundreds."""
    path = tmp_path / "pcm.sqlite3"
    store = SqliteStore(path)
    sid = store.create_session("long")
    chain = _chain(300, composed=True)
    for record in chain[:200]:
        store.add_summary(sid, record)
    rows = [json.loads(r[0]) for r in store.db.connection().execute("SELECT data FROM summaries ORDER BY seq")]
    tails = [len(json.dumps(row["content_tail"])) for row in rows[10:]]
    assert not any("content" in row for row in rows[10:])
    assert max(tails) < 1.2 * tails[0]  # bounded, where the whole content grows with every part:
    assert len(chain[199].content) > 2 * len(chain[10].content)
    _same(store.list_summaries(sid)[0], chain[199])
    for k in (0, 1, 7, 8, 120):
        _same(store.get_summary(chain[k].summary_id), chain[k])
    store.close()

    reopened = SqliteStore(path)
    _same(reopened.list_summaries(sid)[0], chain[199])
    for record in chain[200:]:
        reopened.add_summary(sid, record)
    _same(reopened.get_summary(chain[-1].summary_id), chain[-1])
    _same(reopened.summary_by_key("key-250"), chain[250])
    reopened.close()
    _same(SqliteStore(path).list_summaries(sid)[0], chain[-1])


def test_a_content_that_keeps_no_line_of_its_base_is_stored_whole(store: SqliteStore) -> None:
    sid = store.create_session("brief")
    first, second = _chain(2)
    store.add_summary(sid, first)
    store.add_summary(sid, second.model_copy(update={"content": "a new brief\nin two lines"}))
    row = store.db.one("SELECT data FROM summaries WHERE summary_id = ?", (second.summary_id,))
    assert "a new brief" in row["data"] and "content_tail" not in row["data"]
    assert store.get_summary(second.summary_id).content == "a new brief\nin two lines"  # type: ignore[union-attr]


def test_a_version_another_process_closed_reads_as_closed_in_the_process_that_wrote_it(tmp_path: Path) -> None:
    """The writer remembers the end of each chain it wrote (read without walking the chain); a
    version another store closed since is read with the row's own columns: closed."""
    path = tmp_path / "pcm.sqlite3"
    writer, other = SqliteStore(path), SqliteStore(path)
    sid = writer.create_session("two")
    first, second = _chain(2, composed=True)
    writer.add_summary(sid, first)
    other.add_summary(sid, second)  # closes ``first`` in the database
    got = writer.get_summary(first.summary_id)
    assert got is not None and got.valid_to == second.created_at
    assert [s.summary_id for s in writer.list_summaries(sid)] == [second.summary_id]
    _same(writer.get_summary(second.summary_id), second)
    writer.close()
    other.close()
