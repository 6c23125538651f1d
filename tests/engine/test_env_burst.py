"""No environment event is silently dropped (issue: one non-UTF-8 file name lost its whole batch).

A burst of files, some named with bytes that are not UTF-8, some fifos, binary or linked out of
the folder, goes through the real watchdog sensor, the intake, SQLite and LanceDB: every file
written ends as a stored env event or a recorded failure, names are kept losslessly, and a
failing event is isolated from its batch and retried (the rest of the batch lands).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.config import default_models_dir
from app.core.engine.facade import Engine
from app.core.runtime.intake import EnvIntake, raw_uri
from app.core.types import EnvEvent
from app.sensors.files import make_preparer
from app.sensors.sensorset import SensorSet
from tests.conftest import EngineFactory


def _write_burst(folder: Path, outside: Path, n: int) -> set[str]:
    """``n`` entries in ``folder`` (every 10th name not UTF-8, every 50th a fifo, every 60th
    binary, every 70th a symlink out of the folder), written as fast as possible; returns their
    paths as ``os.fsdecode`` gives them (the sensor's form)."""
    base = os.fsencode(folder)
    secret = outside / "secret.txt"
    secret.write_text("OUTSIDE SECRET", encoding="utf-8")
    written = set()
    for i in range(n):
        name = b"bad-\xff\xfe-%d-\xe9t\xe9.txt" % i if i % 10 == 3 else b"note-%d.md" % i
        path = os.path.join(base, name)
        if i % 50 == 7:
            os.mkfifo(path)
        elif i % 70 == 11:
            os.symlink(secret, path)
        else:
            with open(path, "wb") as fh:
                fh.write(b"\x00\x01binary" if i % 60 == 5 else b"note %d: the plan for item %d\n" % (i, i))
        written.add(os.fsdecode(path))
    return written


async def _run_burst(engine: Engine, folder: Path, outside: Path, n: int, timeout_s: float) -> dict[str, Any]:
    await engine.start()
    sid = (await engine.open_session(None)).session_id
    engine.set_watched_folders([folder])
    failed: list[Any] = []
    engine.env_failed.connect(lambda _sid, fs: failed.extend(fs))

    async def handler(events: list[EnvEvent]) -> None:
        await engine.ingest_env(sid, events)

    intake = EnvIntake(handler, coalesce_ms=200, prepare=make_preparer(100_000))
    intake.start()
    sensors = SensorSet.build(intake.put, folders=[folder])
    await asyncio.get_running_loop().run_in_executor(None, sensors.start)
    started = time.monotonic()
    written = _write_burst(folder, outside, n)
    seen: set[str] = set()
    while time.monotonic() - started < timeout_s:
        await asyncio.sleep(0.5)
        events = await engine.env_events(sid)
        failures = await engine.env_failures(sid)
        seen = {raw_uri(e) for e in events} | {e["uri"] for e in failures}
        if written <= seen:
            break
    elapsed = time.monotonic() - started
    sensors.stop()
    await intake.stop()
    events = await engine.env_events(sid)
    failures = await engine.env_failures(sid)
    hits = await engine._ctx.ex.run("index", engine._ctx.index.search_text, "OUTSIDE SECRET", 10, session_id=sid)
    await engine.close()
    return {"written": written, "events": events, "failures": failures, "elapsed": elapsed, "stats": intake.stats(),
            "announced": failed, "secret_hits": hits}


def _check(result: dict[str, Any]) -> None:
    written, events = result["written"], result["events"]
    by_path = {raw_uri(e): e for e in events}
    recorded = {f["uri"] for f in result["failures"] if f["type"] == "env.failed"}
    lost = written - set(by_path) - recorded
    assert not lost, f"{len(lost)} of {len(written)} files lost: {sorted(lost)[:5]}"
    assert result["stats"].lost == 0
    odd = [p for p in written if "bad-" in p]
    for path in odd:  # lossless: the exact bytes of the name come back; shown escaped
        event = by_path[path]
        assert os.fsencode(raw_uri(event)) == os.fsencode(path)
        assert "\\xff\\xfe" in event.uri and "\\xff\\xfe" in event.payload["path"]
        assert event.uri.encode("utf-8") and event.content.startswith("note ")
    links = [e for e in events if e.payload.get("skipped") == "link_out"]
    assert links and all(e.content == "" and e.payload["message"] == "refused: link out of the watched folder"
                         for e in links)
    assert not any("OUTSIDE SECRET" in e.content for e in events) and result["secret_hits"] == []
    assert {e.payload.get("skipped") for e in events} >= {"not_a_file", "binary", "link_out"}


def test_a_300_file_burst_with_non_utf8_names_loses_nothing(tmp_path: Path, make_engine: EngineFactory) -> None:
    folder, outside = tmp_path / "watched", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    engine = make_engine(data_dir=tmp_path / "data")
    result = asyncio.run(_run_burst(engine, folder, outside, 300, timeout_s=60))
    _check(result)
    assert len(result["written"]) == 300 and result["failures"] == []


@pytest.mark.slow
def test_a_5000_file_burst_with_non_utf8_names_loses_nothing(tmp_path: Path, make_engine: EngineFactory) -> None:
    folder, outside = tmp_path / "watched", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    engine = make_engine(data_dir=tmp_path / "data")
    result = asyncio.run(_run_burst(engine, folder, outside, 5000, timeout_s=240))
    _check(result)
    print(f"\n5,000-file burst: {len(result['written'])} written, {len(result['events'])} env events stored, "
          f"{len(result['failures'])} failures recorded, {result['elapsed']:.1f} s")


@pytest.mark.model
def test_a_burst_with_non_utf8_names_through_the_real_embedder(tmp_path: Path, make_engine: EngineFactory) -> None:
    model_dir = default_models_dir() / "all-MiniLM-L6-v2"
    if not model_dir.is_dir():
        pytest.skip("the MiniLM embedder is not fetched")
    from app.llm.embedder import SentenceEmbedder

    folder, outside = tmp_path / "watched", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    engine = make_engine(data_dir=tmp_path / "data", embedder=SentenceEmbedder(model_dir))
    result = asyncio.run(_run_burst(engine, folder, outside, 100, timeout_s=120))
    _check(result)
    assert result["failures"] == []


# --------------------------------------------------------------------------- isolation


def test_a_failing_event_is_isolated_retried_and_recorded(tmp_path: Path, make_engine: EngineFactory,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """In one batch of 40: two events the store always refuses, one it refuses once, one the
    embedder refuses. The 37 others land at once, the flaky one on its retry, the one that cannot
    be embedded is stored but reported as not indexed, the two refused ones are recorded with
    their reason and announced; nothing raises."""
    engine = make_engine(data_dir=tmp_path / "data")
    store, embedder = engine._ctx.store, engine._ctx.embedder
    real_add, real_embed = store.add_env_event, embedder.embed
    refused_once: set[str] = set()

    def add_env_event(session_id: str, event: EnvEvent) -> EnvEvent:
        if "cursed" in event.title or ("flaky" in event.title and event.event_id not in refused_once):
            refused_once.add(event.event_id)
            raise OSError(f"disk said no to {event.title}")
        return real_add(session_id, event)

    def embed(texts: list[str], **kw: Any) -> np.ndarray:
        if any("poison" in t for t in texts):
            raise ValueError("the tokenizer choked")
        return real_embed(texts, **kw)

    monkeypatch.setattr(store, "add_env_event", add_env_event)
    monkeypatch.setattr(embedder, "embed", embed)
    titles = [f"file-{i}.md" for i in range(36)] + ["cursed-a.md", "flaky.md", "poison.md", "cursed-b.md"]
    batch = [EnvEvent(kind="file", source="/w", uri=f"/w/{t}", title=t, content=f"text of {t}",
                      payload={"path": t, "change": "created"}) for t in titles]

    async def main() -> dict[str, Any]:
        await engine.start()
        sid = (await engine.open_session(None)).session_id
        announced: list[Any] = []
        engine.env_failed.connect(lambda _sid, fs: announced.extend(fs))
        routed = await engine.ingest_env(sid, batch)
        out = {"routed": routed, "events": await engine.env_events(sid), "failures": await engine.env_failures(sid),
               "announced": announced,
               "found": await engine._ctx.ex.run("index", engine._ctx.index.search_text, "text of file", 50, session_id=sid),
               "poison": await engine._ctx.ex.run("index", engine._ctx.index.search_text, "poison", 5, session_id=sid),
               "again": await engine.ingest_env(sid, batch)}
        await engine.close()
        return out

    out = asyncio.run(main())
    stored = {e.title for e in out["events"]}
    assert stored == set(titles) - {"cursed-a.md", "cursed-b.md"} and len(out["routed"]) == 38
    assert [r.event.title for r in out["routed"]] == [t for t in titles if not t.startswith("cursed")]  # order kept
    by_title = {f["title"]: f for f in out["failures"]}
    assert set(by_title) == {"cursed-a.md", "cursed-b.md", "poison.md"}
    assert by_title["cursed-a.md"]["type"] == "env.failed" and by_title["cursed-a.md"]["attempts"] == 3
    assert by_title["cursed-a.md"]["reason"] == "OSError: disk said no to cursed-a.md"
    assert by_title["poison.md"]["type"] == "env.unindexed" and "tokenizer choked" in by_title["poison.md"]["reason"]
    assert {f.event.title for f in out["announced"]} == set(by_title)
    indexed = {i for i, _ in out["found"]}
    assert len(indexed) == 37 and not out["poison"]  # everything stored and embeddable is searchable
    assert out["again"] == []  # delivered again: the stored ones are skipped, the refused ones fail again
