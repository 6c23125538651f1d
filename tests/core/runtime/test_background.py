"""Background tasks are held until they finish, and their failures are logged (runtime.background)."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from app.core.runtime import background


def test_a_spawned_task_outlives_every_other_reference_and_a_collection() -> None:
    async def main() -> list[str]:
        done: list[str] = []
        gate = asyncio.Event()

        async def work() -> None:
            await gate.wait()
            done.append("finished")

        before = background.running()
        background.spawn(work(), name="orphan")  # the caller drops the task at once
        await asyncio.sleep(0)
        gc.collect()
        assert background.running() == before + 1
        gate.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert background.running() == before
        return done

    assert asyncio.run(main()) == ["finished"]


def test_a_failure_nobody_awaited_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> None:
        raise ValueError("disk full")

    async def main() -> None:
        background.spawn(fails(), name="write event")
        for _ in range(3):
            await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger=background.__name__):
        asyncio.run(main())
    assert any("write event" in r.getMessage() and r.exc_info and "disk full" in str(r.exc_info[1]) for r in caplog.records)
