"""The search index's upkeep, in the background: its ANN index trained (again) when due, written rows
folded into the vector and full-text indices.

Index writes come from many places (ingest, answers, the memory writer, environment events,
documents, recovery); rather than have each of them start the upkeep, ``IndexUpkeep`` asks the
index every ``every_s`` seconds whether it has work (``upkeep_due``: counters only, on the loop)
and runs it on the ``upkeep`` executor — a thread of its own, so training (seconds at 10,000 rows,
minutes at 100,000) never holds up the ``index`` pool that serves the builds' queries, and never a
writer. Below the ANN threshold the writers keep folding rows in themselves, as before (so small
workspaces and evaluations see the same index whatever the timing); an engine never started
never trains. Started by ``Engine.start``, stopped by ``Engine.close``.

While history is being imported (``importing``: ``SessionService.importing``) the upkeep waits
behind the import, as the memory writer does — training and folding would take the cores from
its embedding — unless its backlog (``SearchIndex.upkeep_backlog``) reaches ``IMPORT_BACKLOG``
rows: a 100,000-turn import still gets its first ANN index and has its rows folded in, in
batches of about that many rows, so queries meanwhile do not scan it flat. Training the index
*again* (the table doubled) waits for the import to end: at 90,000 rows it takes both cores for
a minute and more, and slowed the import's chunks three-fold while it ran; folding new rows
into the partitions trained first keeps them searchable meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from app.core.engine.context import EngineContext
from app.core.runtime.background import spawn

log = logging.getLogger(__name__)

#: Rows the upkeep lets wait while history is being imported (see the module doc).
IMPORT_BACKLOG = 20_000


class IndexUpkeep:
    """Drives ``SearchIndex.upkeep`` in the background (see the module doc)."""

    def __init__(self, ctx: EngineContext, *, every_s: float = 1.0,
                 importing: Callable[[], bool] = lambda: False) -> None:
        self.ctx = ctx
        self.every_s = every_s
        self.importing = importing  # whether history is being imported (the upkeep waits behind it)
        self._task: asyncio.Task[None] | None = None
        self._running: asyncio.Lock = asyncio.Lock()

    def start(self) -> None:
        """Take the upkeep over from the index's writers and check for work every ``every_s``."""
        index = self.ctx.index
        if index is None or self._task is not None:
            return
        index.upkeep_driven = True
        self._task = spawn(self._loop(), name="index upkeep")

    async def _loop(self) -> None:
        index = self.ctx.index
        assert index is not None
        while True:
            await asyncio.sleep(self.every_s)
            importing = self.importing()
            if index.upkeep_due() and (not importing or index.upkeep_backlog(retrain=False) >= IMPORT_BACKLOG):
                try:
                    await self.run(retrain=not importing)
                except Exception:  # the index stays usable (flat, or with more unindexed rows)
                    log.exception("index upkeep failed")

    async def run(self, *, force: bool = False, retrain: bool = True) -> str:
        """Run the upkeep now (after one already running); return what it did (``SearchIndex.upkeep``)."""
        index = self.ctx.index
        if index is None:
            return ""
        async with self._running:
            return await self.ctx.ex.run("upkeep", index.upkeep, force=force, retrain=retrain)

    async def close(self) -> None:
        """Stop checking and wait for an upkeep under way (it is not interruptible)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        async with self._running:
            pass
        if self.ctx.index is not None:
            self.ctx.index.upkeep_driven = False
