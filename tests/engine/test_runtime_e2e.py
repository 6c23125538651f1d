"""Sensors → intake → engine, end to end with the real watchdog, SQLite and LanceDB (scripted
model): a file edited in a watched folder reaches the active task that names it, pushes a
notice with that task's context, and stays searchable; an unrelated file stays in the lane."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from app.core.runtime.intake import EnvIntake
from app.core.types import EdgeKind, NodeKind
from app.sensors.files import make_preparer
from app.sensors.sensorset import SensorSet
from tests.conftest import EngineFactory


def test_an_edited_watched_file_reaches_the_active_task_that_mentions_it(
    tmp_path: Path, make_engine: EngineFactory
) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    engine = make_engine(["OK."], data_dir=tmp_path / "data")

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None)
        sid = state.session_id
        engine.set_watched_folders([folder])
        task = (await engine.create_task(sid, "Update the budget in budget.md for Q3",
                                         acceptance="budget.md has the Q3 numbers")).tasks[0]
        await engine.start_task(sid, task.task_id)
        pushed: list = []
        engine.env_pushed.connect(pushed.append)
        routed: list = []

        async def handler(events):
            routed.extend(await engine.ingest_env(sid, events))

        intake = EnvIntake(handler, coalesce_ms=150, prepare=make_preparer(100_000))
        intake.start()
        sensors = SensorSet.build(intake.put, folders=[folder], ignore_patterns=["*.tmp"])
        sensors.start()
        try:
            (folder / "budget.md").write_text("Q3: hardware 40k", encoding="utf-8")
            (folder / "budget.md").write_text("Q3: hardware 40k, travel 12k", encoding="utf-8")
            (folder / "lunch.txt").write_text("pizza on friday", encoding="utf-8")
            (folder / "scratch.tmp").write_text("ignored", encoding="utf-8")
            deadline = time.monotonic() + 20
            while len(routed) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        finally:
            sensors.stop()
            await intake.stop()
        by_name = {Path(r.event.uri).name: r for r in routed}
        assert set(by_name) == {"budget.md", "lunch.txt"}  # one event per file, the .tmp ignored
        budget = by_name["budget.md"]
        assert "travel 12k" in budget.event.content  # coalesced: the last version was read
        assert budget.target_kind == "task" and budget.task_id == task.task_id
        task_node = state.graph.node(budget.target_node)
        assert task_node.kind == NodeKind.TASK
        edges = state.graph.out_edges(budget.node_id, EdgeKind.REFERENCES)
        assert [e.dst for e in edges] == [budget.target_node]
        assert by_name["lunch.txt"].target_kind == "lane"
        assert len(pushed) == 1 and pushed[0].task.task_id == task.task_id
        pushed_text = pushed[0].context.context.text()
        assert "travel 12k" in pushed_text and "budget" in pushed_text.lower()
        # The event is evidence for later questions about the file.
        build, _ = await engine.build(sid, "What changed in budget.md?")
        assert budget.event.event_id in build.context.source_ids()
        await engine.close()

    asyncio.run(main())
