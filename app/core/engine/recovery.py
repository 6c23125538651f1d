"""After a crash: answers checkpointed as they stream, interrupted turns marked, the index caught up.

- ``AnswerCheckpointer``: while an answer streams, its text so far is written to the store (at
  most one write in flight, at least ``EngineConfig.checkpoint_s`` seconds apart, on the store
  executor) and each piece is shown only once a write holding it has committed: a crash never
  loses answer text the user saw.
- ``RecoveryService.start`` (from ``Engine.start``, before any session is opened): every unfinished
  turn of a run that is gone is marked "interrupted" with what is known — its build record, the
  checkpointed text as its partial answer, a canvas node if it never got one — and the search
  index catches up with the store: an interrupted rebuild is finished before ``start`` returns
  (the index is not used half-built); rows the store has and the index lacks are embedded in the
  background (``index_progress`` reports it), so opening is never held up by them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.core.engine.context import EngineContext
from app.core.pipeline.record import TurnRecord
from app.core.ports import CancelToken
from app.core.runtime.background import spawn
from app.core.signals import Signal
from app.core.types import Author, AuthorKind, GraphNode, Message, NodeKind, Ref, Role

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted"
CATCH_UP_BATCH = 64  # rows embedded per call on the embed executor


class AnswerCheckpointer:
    """Writes the streamed text of one answer to the store before it is shown (write-ahead).

    ``add`` takes each streamed piece; a write of the text so far starts at once when none is in
    flight and the last began at least ``interval_s`` ago (else when that time is up), and only
    when it has committed are its pieces handed to ``show``. A crash therefore never loses text
    the user saw; what it can lose is text still held back, at most one write plus ``interval_s``.
    ``finish`` writes and shows the rest. ``interval_s < 0`` turns checkpoints off (pieces are shown
    at once). A write that fails is logged (once) and tried again with what has streamed by then;
    ``finish`` shows the whole answer even if the store keeps failing (its final write reports it).
    """

    def __init__(self, ctx: EngineContext, turn_id: str, interval_s: float,
                 show: Callable[[str], None] | None = None) -> None:
        self.ctx, self.turn_id, self.interval_s, self.show = ctx, turn_id, interval_s, show
        self.pieces: list[str] = []
        self.shown = 0  # pieces handed to ``show``
        self.writes = self.failures = 0  # checkpoint writes done and failed (diagnostics, tests)
        self._last = float("-inf")
        self._inflight: asyncio.Task[BaseException | None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def add(self, piece: str) -> None:
        """Take one streamed piece: shown once a checkpoint holding it has committed."""
        self.pieces.append(piece)
        if self.interval_s < 0:
            self._release(len(self.pieces))
        else:
            self._pump()

    async def finish(self) -> None:
        """Write what is not written yet and show it (the stream has ended, or failed)."""
        await self._settle()
        if self.interval_s >= 0 and self.shown < len(self.pieces):
            self._last = float("-inf")  # the last write is due now, not after the interval
            self._pump()
            await self._settle()
        self._release(len(self.pieces))

    async def _settle(self) -> None:
        """Wait for the writes in flight (each may start the next), then drop a pending one."""
        while self._inflight is not None:
            await asyncio.wait([self._inflight])
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _pump(self) -> None:
        if self._inflight is not None or self._timer is not None or self.shown == len(self.pieces):
            return
        wait = self._last + self.interval_s - time.monotonic()
        if wait > 0:
            self._timer = asyncio.get_running_loop().call_later(wait, self._due)
            return
        self._last = time.monotonic()
        count = len(self.pieces)
        task = spawn(self._write(count), name=f"checkpoint {self.turn_id}")
        self._inflight = task
        task.add_done_callback(lambda done: self._written(done, count))

    async def _write(self, count: int) -> BaseException | None:
        """One checkpoint write; its failure (another process holding the database past the busy
        timeout: "database is locked") is returned, not raised — it is this object's to report and
        retry, never a background task's traceback."""
        try:
            await self.ctx.on_store(self.ctx.store.save_answer_checkpoint, self.turn_id, "".join(self.pieces[:count]),
                                    count)
        except Exception as exc:  # noqa: BLE001 - reported once and retried (_written)
            return exc
        return None

    def _due(self) -> None:
        self._timer = None
        self._pump()

    def _written(self, task: asyncio.Task[BaseException | None], count: int) -> None:
        self._inflight = None
        error = "cancelled" if task.cancelled() else task.result()
        if error is not None:
            if not self.failures:
                log.warning("answer checkpoint of %s failed (tried again with the next piece): %s", self.turn_id,
                            " ".join(str(error).split())[:200])
            self.failures += 1
        else:
            self.writes += 1
            self._release(count)
        self._pump()

    def _release(self, count: int) -> None:
        pieces, self.shown = self.pieces[self.shown:count], max(self.shown, count)
        if self.show is not None:
            for piece in pieces:
                self.show(piece)


@dataclass
class RecoveryReport:
    """What ``RecoveryService.start`` found and did."""

    interrupted: list[str] = field(default_factory=list)  # turn ids marked interrupted
    partial_chars: dict[str, int] = field(default_factory=dict)  # turn id → partial answer kept
    rebuild_finished: int = -1  # rows embedded finishing an interrupted rebuild (-1: none pending)
    caught_up: int = 0  # rows the background catch-up embedded (filled in when it ends)

    def lines(self) -> list[str]:
        """One short line per thing worth telling the user (none when nothing happened)."""
        out = []
        if self.interrupted:
            kept = sum(1 for n in self.partial_chars.values() if n)
            out.append(f"{len(self.interrupted)} turn(s) were interrupted when the app last stopped; marked "
                       f"interrupted" + (f", {kept} with the partial answer kept" if kept else ""))
        if self.rebuild_finished >= 0:
            out.append(f"finished an interrupted rebuild of the search index ({self.rebuild_finished} rows embedded)")
        return out


def interrupted_turn(turn: dict[str, Any]) -> tuple[dict[str, Any] | None, Message | None, GraphNode | None]:
    """What to store for an unfinished turn of a dead run (a row of ``interrupted_turns``): its
    record marked interrupted with the partial answer (None when it was never built), the partial
    answer as the turn's message (None without streamed text) and a canvas node for a turn that
    never got one (None otherwise)."""
    checkpoint = turn.get("checkpoint") or {}
    partial = str(checkpoint.get("text") or "")
    stage = "while its answer was streaming" if partial else "before its answer started"
    if not (turn.get("record") or {}).get("build"):
        label = str(turn.get("input_text") or "")[:40]
        node = GraphNode(kind=NodeKind.TURN, label=label, ref_id=turn["turn_id"], created_at=turn["created_at"])
        return None, None, node
    record = TurnRecord.model_validate(turn["record"])
    answer = None
    if partial:
        answer = Message(role=Role.ASSISTANT, content=partial, turn_id=record.turn_id,
                         author=Author(kind=AuthorKind.AGENT, id="assistant"), at=checkpoint.get("at") or turn["created_at"],
                         refs=[Ref(evidence_id=e) for e in record.build.context.source_ids()])
        record.answer_message_id = answer.message_id
    record.output, record.finish_reason = partial, INTERRUPTED
    record.usage = {**record.usage, "status": INTERRUPTED, "completion_tokens": int(checkpoint.get("pieces") or 0),
                    "error": f"the app stopped {stage}"}
    return record.model_dump(mode="json"), answer, None


class RecoveryService:
    """Marks interrupted turns and keeps the search index up with the store (see the module doc)."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.index_progress: Signal[[str, int, int]] = Signal("index_progress")  # (what, done, total)
        self.report = RecoveryReport()
        self.catch_up_task: asyncio.Task[int] | None = None
        self._cancel = CancelToken()

    async def start(self) -> RecoveryReport:
        """Recover interrupted turns, finish an interrupted index rebuild, start the catch-up."""
        await self.recover_turns()
        index = self.ctx.index
        if index is not None:
            if index.needs_rebuild:
                self.report.rebuild_finished = await self.catch_up("finishing the interrupted index rebuild")
            else:
                self.catch_up_task = spawn(self._background_catch_up(), name="index catch-up")
        return self.report

    async def recover_turns(self) -> list[str]:
        """Mark every unfinished turn of a run that is gone "interrupted"; return their ids."""
        store = self.ctx.store

        def work() -> list[tuple[str, int]]:
            done = []
            for turn in store.interrupted_turns():
                try:
                    record, answer, node = interrupted_turn(turn)
                except Exception:  # noqa: BLE001 - an unreadable record: still marked, kept as stored
                    log.exception("turn %s: its record could not be read; marked interrupted as stored",
                                  turn["turn_id"])
                    record, answer, node = None, None, None
                with store.transaction():
                    if not store.interrupt_turn(turn["turn_id"], record=record, answer=answer):
                        continue  # another process recovered it first
                    if node is not None:
                        store.save_node(turn["session_id"], node)
                done.append((turn["turn_id"], len(answer.content) if answer is not None else 0))
            store.sweep_runs()
            return done

        recovered = await self.ctx.on_store(work)
        for turn_id, chars in recovered:
            self.report.interrupted.append(turn_id)
            self.report.partial_chars[turn_id] = chars
        if recovered:
            log.info("marked %d interrupted turn(s)", len(recovered))
        return [turn_id for turn_id, _ in recovered]

    async def catch_up(self, what: str = "indexing rows missing from the search index") -> int:
        """Embed the rows the store has and the index lacks and drop the ones it should not hold
        (superseded memory); report progress as ``index_progress(what, done, total)``; return
        how many rows were embedded. One batch at a time on the embed executor, so the query
        embeddings of builds running meanwhile wait for one batch at most."""
        ctx, index = self.ctx, self.ctx.index
        if index is None:
            return 0
        if index.needs_rebuild:
            return await self._finish_rebuild(what)
        have = await ctx.on_index(index.ids)  # before the store's: see SearchIndex.reconcile_rows
        wanted = await ctx.on_store(ctx.store.searchable_ids)
        stale = have - wanted
        if stale:
            await ctx.ex.run("embed", index.remove, stale)
        missing = await ctx.on_store(ctx.store.list_searchable, wanted - have) if wanted - have else []
        done = 0
        for start in range(0, len(missing), CATCH_UP_BATCH):
            if self._cancel.cancelled:
                break
            done += await ctx.ex.run("embed", index.add, missing[start:start + CATCH_UP_BATCH])
            self.index_progress.emit(what, done, len(missing))
        return done

    async def _finish_rebuild(self, what: str) -> int:
        """Complete an interrupted rebuild (waiting for another process that runs one)."""
        ctx, index = self.ctx, self.ctx.index
        assert index is not None
        loop = asyncio.get_running_loop()
        rows = await ctx.on_store(ctx.store.list_searchable)

        def progress(done: int, total: int) -> None:  # on the embed thread
            loop.call_soon_threadsafe(self.index_progress.emit, what, done, total)

        self.index_progress.emit(what, 0, len(rows))
        return await ctx.ex.run("embed", index.reconcile_rows, rows, on_progress=progress, cancel=self._cancel)

    async def _background_catch_up(self) -> int:
        done = await self.catch_up()
        self.report.caught_up = done
        if done:
            log.info("indexed %d row(s) the search index lacked", done)
        return done

    async def close(self) -> None:
        """Stop the catch-up between two batches (what it embedded stays) and wait for it."""
        self._cancel.cancel()
        task = self.catch_up_task
        if task is not None and not task.done():
            try:
                await task
            except Exception:  # noqa: BLE001 - logged by spawn; closing goes on
                pass
