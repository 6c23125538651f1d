"""The resident agent: a task split into steps that run in dependency order, steered while it runs.

``TaskAgent`` works beside the stream scheduler's host (``app.core.engine.streams``), which hands it
a new task's turn, a stream that runs a task, and every stream's end:

- **plan**: a new task's turn asks the chat model for the task's steps (``tasks/steps.py``: the
  task's context with a planning instruction, the answer constrained to ``STEPS_JSON_SCHEMA``),
  or only the rules (``EngineConfig.task_steps`` "rules"); the rules check the proposal and make
  the steps when it fails. The turn's answer is the plan; when it is recorded, the steps become
  the task's children (one revision, ``plan``; the proposal, its source and problems logged as
  ``task.planned``) and the ready ones start.
- **run**: each step runs as a stream of its own — the agent's input "Step 2 of 4: …", anchored
  after the run of the step it depends on — whose context is the step's stack view (the task's
  goal and constraints, the finished steps' results, what changed meanwhile, the work kept at its
  checkpoint). A step that ends with an output completes (its output is its result evidence and
  an artifact node); one that fails runs once more, then fails with its reason, and so do the
  steps that need it; when none is open the task completes with its steps' outputs assembled
  (or fails, naming the failed step). Steps start as they become ready, within the scheduler's
  stream limit; a task whose plan said it may not run beside others (``allow_concurrent``
  False) waits until they are done.
- **steer**: ``pause`` stops the streams working on the task within one token, keeps what each
  produced as its step's checkpoint (an ``llm_output`` evidence) and parks task and step as
  paused; ``resume`` continues each from its checkpoint; ``amend`` joins a constraint to the task
  and, per ``steering.amend_effect``, lets it act at the next step (a step is added when it asks
  for more), restarts the running step from its checkpoint, or waits for the resume; ``cancel``
  fails the task and stops its streams. Each is one revision of the task state (``task.changed``,
  replayed by ``TaskService.replay_state``); a pause also logs ``task.paused`` with the tokens the
  model produced after it was asked and how long the stop took.
- **env**: an env event routed to an open task joins its events (its next step shows it); one that
  names what the task reads amends it.

A single-stream task (``task_steps`` "off", or a task resumed without a plan) is its own step:
paused, resumed and amended the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.engine.tasks import TaskBook, TaskChange, TaskService
from app.core.engine.turns import Attachment, TurnRun
from app.core.intent.profile import to_remember
from app.core.pipeline.record import TurnRecord
from app.core.ports import ChatResult, GenerationParams
from app.core.runtime.background import spawn
from app.core.runtime.scheduler import FINISHED, SessionScheduler, StreamHandle
from app.core.session import versions
from app.core.tasks.stack import FINAL, OPEN, TaskError, summarize_result
from app.core.tasks.steering import (
    NEXT_STEP,
    ON_RESUME,
    RESTART,
    added_step,
    amend_effect,
    amended_note,
    amendment,
    root_task,
)
from app.core.tasks.steps import (
    PLAN_MAX_TOKENS,
    STEPS_JSON_SCHEMA,
    StepPlan,
    assemble,
    plan_for,
    plan_text,
    steps_messages,
)
from app.core.text.quoting import quote_label
from app.core.types import (
    Author,
    AuthorKind,
    EdgeKind,
    Evidence,
    EvidenceSource,
    EvidenceType,
    GraphEdge,
    GraphNode,
    NodeKind,
    SourceKind,
    Task,
    TaskStatus,
)

log = logging.getLogger(__name__)

AGENT = Author(kind=AuthorKind.AGENT, id="task")  # who writes a step's input
RETRY_NOTE = "retried after: "
CONTROLS = ("pause", "resume", "amend", "cancel")


@dataclass(frozen=True)
class Steered:
    """What a steering action did to a task (``Engine.pause_task`` and the others): the task as it
    is now, the revision (None when nothing changed), where an amendment takes effect
    (``steering.NEXT_STEP`` / ``RESTART`` / ``ON_RESUME``) and one line saying it."""

    session_id: str
    task: Task
    change: TaskChange | None
    effect: str = ""
    line: str = ""


class TaskAgent:
    """Plans tasks into steps, runs the steps, and applies the user's steering (module doc)."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, tasks: TaskService,
                 scheduler: Callable[[str], SessionScheduler]) -> None:
        self.ctx, self.sessions, self.tasks, self._scheduler = ctx, sessions, tasks, scheduler
        self._plans: weakref.WeakKeyDictionary[StreamHandle, StepPlan | None] = weakref.WeakKeyDictionary()
        self._queued: dict[tuple[str, str], StreamHandle] = {}  # runs submitted, not attached yet
        self._outputs: dict[str, str] = {}  # evidence id → text (checkpoints, step results) read back
        self._waiting: set[tuple[str, str]] = set()  # tasks waiting for the others to be done
        self.closing = False  # the engine is closing: nothing new starts
        self._hold: weakref.WeakSet[StreamHandle] = weakref.WeakSet()  # planned, then kept paused

    def hold(self, handle: StreamHandle) -> None:
        """The task this stream makes is planned and kept paused (its steps edited, then resumed)."""
        self._hold.add(handle)

    def close(self) -> None:
        """The engine is closing: every task something works on is paused (its streams keep their
        work as checkpoints when they end), so the next run can resume it; nothing new starts."""
        self.closing = True
        for session_id, book in self.tasks.books.items():
            busy = {root_task(book.stack, t).task_id for t, h in book.live.items()
                    if t in book.stack and h.status not in FINISHED}
            busy |= {root_task(book.stack, t).task_id for sid, t in self._queued if sid == session_id and t in book.stack}
            for root_id in busy:
                if book.stack.get(root_id).status not in FINAL:
                    self.pause_now(session_id, root_id, reason="the app is closing")

    # ------------------------------------------------------------------ plan

    def plan_attachment(self, handle: StreamHandle, task: Task, text: str, prompt: list[Any],
                        params: GenerationParams, concurrent: bool) -> Attachment | None:
        """How a new task's turn answers: with its plan (None: ``task_steps`` "off", or ``text``,
        the turn's input, only states something to remember: one stream). The model is asked for
        the steps as JSON (the rules check them; the answer is the plan), or, with "rules", the
        rules' plan is the answer at once (no model call)."""
        mode = self.ctx.config.task_steps
        if mode not in ("model", "rules") or to_remember(text):
            return None
        if not concurrent:
            self._waiting.add((handle.session_id, task.task_id))
        if mode == "rules" or self.ctx.chat is None:
            plan = plan_for(task.name, task.acceptance, None)
            self._plans[handle] = plan
            return Attachment(reply=plan_text(task.name, plan))

        def render(result: ChatResult) -> str:
            ok = result.finish_reason == "stop"
            plan = plan_for(task.name, task.acceptance, result.parsed if ok and result.parsed is not None else
                            (result.text if ok else ""))
            self._plans[handle] = plan.model_copy(update={"proposal": result.text})
            return plan_text(task.name, plan)

        self._plans[handle] = None
        return Attachment(messages=steps_messages(prompt), json_schema=STEPS_JSON_SCHEMA, render=render,
                          params=params.model_copy(update={"max_tokens": PLAN_MAX_TOKENS, "temperature": 0.0}))

    def planning(self, handle: StreamHandle) -> bool:
        """Whether the stream is a new task's turn answering with its plan."""
        return handle in self._plans

    def forget(self, handle: StreamHandle) -> None:
        """A planning turn whose task ended meanwhile: its plan is not needed."""
        self._plans.pop(handle, None)

    async def plan_done(self, handle: StreamHandle, record: TurnRecord | None) -> None:
        """A task's planning turn ended: its steps join the task (and start), or the task fails."""
        sid, book = handle.session_id, self.tasks.books[handle.session_id]
        assert handle.task_id is not None
        task = book.stack.get(handle.task_id)
        plan = self._plans.pop(handle, None)
        if plan is None and task.paused and record is not None:  # stopped while planning: the rules plan it
            plan = plan_for(task.name, task.acceptance, None)
        if plan is None or record is None or (record.finish_reason not in ("stop", "length") and not task.paused):
            reason = handle.stop_reason or f"no plan ({record.finish_reason if record else 'error'})"
            await self._fail(sid, task.task_id, reason, handle)
            return
        rows = [(step.name, step.acceptance, list(step.depends_on)) for step in plan.steps]
        started = book.stack.start(task.task_id) if task.status == TaskStatus.PENDING else []
        change, persist = self.tasks.add_steps(sid, task.task_id, rows, more=started, stream_seq=handle.seq)
        await self.tasks.write_now(persist)
        self.tasks.announce(sid, change.tasks)
        await self.ctx.on_store(self.ctx.store.append_event, sid, "task.planned", {
            "task_id": task.task_id, "turn_id": record.turn_id, "source": plan.source, "problems": plan.problems,
            "proposal": plan.proposal, "steps": [t.task_id for t in change.tasks if t.step]})
        if handle in self._hold and not book.stack.get(task.task_id).paused:
            self._commit_now(sid, "pause", book.stack.pause(task.task_id))
        self.advance(sid, task.task_id)

    # ------------------------------------------------------------------ runs

    def launch(self, session_id: str, root: Task, task: Task) -> StreamHandle | None:
        """Queue a stream that runs ``task`` (a step of ``root``'s plan, or ``root`` itself) — from
        its checkpoint when it has one; None when one is queued or running already."""
        key = (session_id, task.task_id)
        book = self.tasks.books[session_id]
        if key in self._queued or task.task_id in book.live:
            return None
        kept = self._kept(book, root.task_id)
        what = f"Step {task.step} of {len(kept)}: {task.name}" if task.step else task.name
        text = f"Continue {what[:1].lower()}{what[1:]}" if task.checkpoint_id else what
        handle = self._scheduler(session_id).submit(
            text, anchor_override=self._anchor(session_id, root, task), run_task_id=task.task_id,
            resume_from=task.checkpoint_id)
        self._queued[key] = handle

        def gone(_future: asyncio.Future[Any]) -> None:
            if self._queued.get(key) is handle:
                del self._queued[key]

        handle.done.add_done_callback(gone)
        return handle

    def _anchor(self, session_id: str, root: Task, task: Task) -> str | None:
        """Where a run continues: its own last run (a continuation), else the last run of the
        latest step it depends on, else the task's turn, else the turn whose node spawned the
        task's node (a task restored from a checkpoint: its new branch starts there)."""
        state, stack = self.ctx.sessions[session_id], self.tasks.books[session_id].stack
        for turns in (task.runs, *(stack.get(d).runs for d in reversed(task.depends_on) if d in stack),
                      [t for t in (root.turn_id,) if t]):
            for turn_id in reversed(turns):
                node = state.node_of(turn_id)
                if node is not None:
                    return node
        if root.node_id is None or root.node_id not in state.graph:
            return None
        return next((e.src for e in state.graph.in_edges(root.node_id, EdgeKind.SPAWNED)
                     if state.graph.node(e.src).kind == NodeKind.TURN), None)

    def attached(self, handle: StreamHandle) -> None:
        """A run's turn is attached: it is no longer queued."""
        if handle.run_task_id is not None and self._queued.get((handle.session_id, handle.run_task_id)) is handle:
            del self._queued[(handle.session_id, handle.run_task_id)]

    def checkpoint_text(self, evidence_id: str | None) -> str:
        """The work kept at a checkpoint (read back by ``load``)."""
        return self._outputs.get(evidence_id or "", "")

    async def load(self, evidence_ids: Sequence[str | None]) -> None:
        """Read back the texts of checkpoints and results the agent does not hold (another run's)."""
        for evidence_id in evidence_ids:
            if evidence_id and evidence_id not in self._outputs:
                evidence = await self.ctx.on_store(self.ctx.store.get_evidence, evidence_id)
                if evidence is not None:
                    self._outputs[evidence_id] = evidence.content

    async def run_done(self, handle: StreamHandle, record: TurnRecord | None) -> None:
        """A stream that ran a task ended: keep its work (paused, restarted), complete the task with
        its output, run it again once after a failure, or fail it."""
        sid, book = handle.session_id, self.tasks.books[handle.session_id]
        assert handle.task_id is not None
        task = book.stack.get(handle.task_id)
        root = root_task(book.stack, task.task_id)
        finish = record.finish_reason if record is not None else "error"
        output = self.checkpoint_text(handle.resume_from) + (record.output if record is not None else "")
        if handle.steer in ("pause", "restart"):
            await self._keep(handle, task, output, record)
        elif finish in ("stop", "length") and output.strip():
            await self._complete(sid, task, output, record, handle)
        elif finish == "cancelled":
            await self._fail(sid, task.task_id, handle.stop_reason or "stopped", handle)
        elif any(n.startswith(RETRY_NOTE) for n in task.notes):
            await self._fail(sid, task.task_id, f"failed twice: no result ({finish})", handle)
        else:
            await self._commit(sid, "retry", book.stack.note(task.task_id, f"{RETRY_NOTE}{finish}"), handle=handle)
        self.advance(sid, root.task_id)

    async def _keep(self, handle: StreamHandle, task: Task, output: str, record: TurnRecord | None) -> None:
        """A stream stopped to pause or restart its task: what it produced becomes the task's
        checkpoint (an evidence), the task is paused (a pause — unless it was resumed while the
        stream stopped: then it runs again from the checkpoint); ``task.paused`` logs how many
        tokens the model produced after the stop was asked and how long stopping took."""
        sid, book = handle.session_id, self.tasks.books[handle.session_id]
        after = self._produced_after(handle)
        stop_ms = ((handle.finished_at or time.perf_counter()) - handle.stop_asked_at) * 1000 \
            if handle.stop_asked_at is not None else None
        evidences: list[Evidence] = []
        checkpoint_id = None
        if output.strip():
            evidence = Evidence(type=EvidenceType.LLM_OUTPUT, content=output,
                                source=EvidenceSource(kind=SourceKind.LLM, name="task checkpoint"),
                                metadata={"task_id": task.task_id, "partial": True,
                                          "turn_id": record.turn_id if record else None, "steer": handle.steer})
            evidences.append(evidence)
            checkpoint_id = evidence.evidence_id
            self._outputs[evidence.evidence_id] = output
        if handle.steer == "pause" and task.status in OPEN and root_task(book.stack, task.task_id).paused:
            changed = book.stack.pause(task.task_id, checkpoint_id=checkpoint_id) if checkpoint_id or task.step else []
        else:
            changed = book.stack.keep(task.task_id, checkpoint_id) if checkpoint_id else []
        await self._commit(sid, handle.steer, changed, evidences=evidences, handle=handle)
        await self.ctx.on_store(self.ctx.store.append_event, sid, "task.paused" if handle.steer == "pause" else
                                "task.restarted", {"task_id": task.task_id, "turn_id": record.turn_id if record else None,
                                                   "checkpoint_id": checkpoint_id, "tokens_after_stop": after,
                                                   "stop_ms": None if stop_ms is None else round(stop_ms, 3),
                                                   "kept_chars": len(output)})

    @staticmethod
    def _produced_after(handle: StreamHandle) -> int | None:
        run = handle.run
        stream = run.stream if isinstance(run, TurnRun) else None
        return None if stream is None else stream.produced_after_stop

    async def _complete(self, sid: str, task: Task, output: str, record: TurnRecord | None,
                        handle: StreamHandle | None) -> None:
        """Complete a task with ``output``: its result evidence (the whole output; the summary is
        its first sentences) and an artifact node for it."""
        book = self.tasks.books[sid]
        evidence = Evidence(type=EvidenceType.LLM_OUTPUT, source=EvidenceSource(kind=SourceKind.LLM, name="task result"),
                            content=output, metadata={"task_id": task.task_id, "turn_id": record.turn_id if record else None,
                                                      "message_id": record.answer_message_id if record else None})
        self._outputs[evidence.evidence_id] = output
        changed = book.stack.complete(task.task_id, summarize_result(output), [evidence.evidence_id])
        nodes, edges = self.artifact(sid, task, evidence)
        attrs = {"tokens": handle.tokens, "steps": 0} if handle is not None else None
        await self._commit(sid, "finish", changed, evidences=[evidence], handle=handle, nodes=nodes, edges=edges,
                           extra_attrs=attrs)

    def artifact(self, session_id: str, task: Task, result: Evidence) -> tuple[list[GraphNode], list[GraphEdge]]:
        """A completed task's result as an artifact node (``derived_from`` the task's node, bound to
        the result's evidence); a task completed again, or a new version of the task, makes the next
        version."""
        state = self.ctx.sessions[session_id]
        if task.node_id is None or task.node_id not in state.graph:
            return [], []
        version = 1 + versions.results_before(state.graph, task.node_id)
        at = result.valid_from
        node = GraphNode(kind=NodeKind.ARTIFACT, label=quote_label(f"Result v{version}: {task.name}", 60),
                         ref_id=result.evidence_id, created_at=at, attrs={"task_id": task.task_id, "version": version})
        return [node], [GraphEdge(src=node.node_id, dst=task.node_id, kind=EdgeKind.DERIVED_FROM, created_at=at)]

    async def _fail(self, sid: str, task_id: str, reason: str, handle: StreamHandle | None = None) -> None:
        book = self.tasks.books[sid]
        task = book.stack.get(task_id)
        if task.status in FINAL:
            return
        progress = book.stack.set_progress(task_id, handle.tokens / max(1, handle.max_tokens)) if handle else []
        changed = progress + book.stack.fail(task_id, reason)
        self.tasks.stop_failed(book, changed, reason)
        self._stop_queued(sid, [t.task_id for t in changed], reason)
        await self._commit(sid, "finish" if handle is not None else "fail", changed, handle=handle,
                           extra_attrs={"tokens": handle.tokens, "steps": 0} if handle is not None else None)

    # ------------------------------------------------------------------ advancing a plan

    def advance(self, session_id: str, root_id: str) -> None:
        """Move ``root_id`` on: start its steps that are ready (or run it again when it is a
        single stream left without one), fail the steps that can never run, and end it once no
        step is open. Runs nothing while it is paused, or waits for the tasks running beside it."""
        book = self.tasks.books.get(session_id)
        if book is None or root_id not in book.stack or self.closing:
            return
        root = book.stack.get(root_id)
        if root.status in FINAL or root.paused:
            self._release_waiting(session_id, root_id)
            return
        steps = book.stack.steps(root_id)
        if not steps:
            if self._stalled(session_id, book, root) and not self.planning_live(book, root_id):
                self.launch(session_id, root, root)
            return
        doomed = self._doomed(book, root_id)
        if doomed:
            self._commit_now(session_id, "fail", doomed)
        if not any(s.status in OPEN for s in book.stack.steps(root_id)):
            spawn(self._finalize(session_id, root_id), name=f"task {root_id} done")
            return
        if (session_id, root_id) in self._waiting and self._others_live(book, root_id):
            return
        self._waiting.discard((session_id, root_id))
        for step in [*book.stack.ready_steps(root_id), *(s for s in steps if self._stalled(session_id, book, s))]:
            self.launch(session_id, root, step)

    def planning_live(self, book: TaskBook, task_id: str) -> bool:
        handle = book.live.get(task_id)
        return handle is not None and handle in self._plans

    def _stalled(self, session_id: str, book: TaskBook, task: Task) -> bool:
        """An active task no stream works on (stopped to restart, failed once, resumed): it has
        run (as a step, or as a single-stream task's own turn, which leaves a checkpoint)."""
        return (task.status == TaskStatus.ACTIVE and not task.paused and (task.attempts > 0 or bool(task.checkpoint_id))
                and task.task_id not in book.live and (session_id, task.task_id) not in self._queued)

    @staticmethod
    def _doomed(book: TaskBook, root_id: str) -> list[Task]:
        """Fail the pending steps that need a failed step (directly or through another)."""
        failed = {s.task_id for s in book.stack.steps(root_id) if s.status == TaskStatus.FAILED and s.attempts}
        changed: list[Task] = []
        for step in book.stack.steps(root_id):
            if step.status == TaskStatus.PENDING and failed & set(step.depends_on):
                name = book.stack.get(sorted(failed & set(step.depends_on))[0]).name
                changed += book.stack.fail(step.task_id, f"a step it needs failed: {name}")
                failed.add(step.task_id)
        return changed

    @staticmethod
    def _others_live(book: TaskBook, root_id: str) -> bool:
        return any(root_task(book.stack, t).task_id != root_id for t in book.live)

    def _release_waiting(self, session_id: str, root_id: str) -> None:
        """A task stopped running: the tasks that waited for the others may start."""
        for sid, waiting in list(self._waiting):
            if sid == session_id and waiting != root_id:
                self.advance(sid, waiting)

    async def _finalize(self, session_id: str, root_id: str) -> None:
        """End a task whose steps are all done: complete it with their outputs assembled, or fail
        it naming the step that failed."""
        book = self.tasks.books[session_id]
        root = book.stack.get(root_id)
        if root.status in FINAL:
            return
        kept = self._kept(book, root_id)
        failed = next((s for s in kept if s.status == TaskStatus.FAILED), None)
        if failed is not None:
            await self._fail(session_id, root_id, f"step {failed.step} \u201c{failed.name}\u201d failed: {failed.error}")
        else:
            await self.load([s.result_evidence_ids[0] for s in kept if s.result_evidence_ids])
            parts = [(s.name, self._outputs.get(s.result_evidence_ids[0] if s.result_evidence_ids else "", "")
                      or s.result_summary) for s in kept]
            await self._complete(session_id, root, assemble(root.name, parts), None, None)
        self._release_waiting(session_id, root_id)

    # ------------------------------------------------------------------ steering

    def pause_now(self, session_id: str, task_id: str, *, reason: str = "paused by the user") -> Steered:
        """Pause a task at once (no await: words, buttons, a changed file): stop the streams working
        on it within one token (their work is kept when they end, ``_keep``), withdraw its queued
        ones, park it as paused. Call with the task book loaded."""
        book = self.tasks.books[session_id]
        root = root_task(book.stack, task_id)
        if root.status in FINAL:
            raise TaskError(f"task \u201c{root.name}\u201d is {root.status.value}: there is nothing to pause")
        for handle in self._working(session_id, root.task_id):
            handle.steer = "pause"
            handle.stop(reason)
        self._stop_queued(session_id, [s.task_id for s in [root, *book.stack.steps(root.task_id)]], reason,
                          steer="pause")
        change = self._commit_now(session_id, "pause", book.stack.pause(root.task_id))
        return Steered(session_id, book.stack.get(root.task_id), change,
                       line=f"Paused \u201c{root.name}\u201d: its work so far is kept; resume continues it.")

    def _working(self, session_id: str, root_id: str) -> list[StreamHandle]:
        """The live streams running the task or its steps (not its planning turn)."""
        book = self.tasks.books[session_id]
        ids = [root_id, *(s.task_id for s in book.stack.steps(root_id))]
        return [book.live[t] for t in ids if t in book.live and book.live[t] not in self._plans]

    def _stop_queued(self, session_id: str, task_ids: Sequence[str], reason: str, steer: str = "") -> None:
        """Stop the runs queued (or starting) for ``task_ids``; ``steer`` "pause": what a run that
        had started keeps is its checkpoint, and its step is paused, not failed."""
        for task_id in task_ids:
            handle = self._queued.pop((session_id, task_id), None)
            if handle is not None:
                handle.steer = steer or handle.steer
                handle.stop(reason)

    async def resume(self, session_id: str, task_id: str) -> Steered:
        """Take a paused task up again: it and its paused steps are active again and continue from
        their checkpoints (their text in each continuation's context); ready steps start."""
        book = await self.tasks.book(session_id)
        root = root_task(book.stack, task_id)
        if root.status in FINAL:
            raise TaskError(f"task \u201c{root.name}\u201d is {root.status.value}: there is nothing to resume")
        paused = [t for t in [root, *book.stack.steps(root.task_id)] if t.paused]
        await self.load([t.checkpoint_id for t in paused])
        changed = [c for t in paused for c in book.stack.resume(t.task_id)]
        change = self._commit_now(session_id, "resume", changed)
        self.advance(session_id, root.task_id)
        return Steered(session_id, book.stack.get(root.task_id), change,
                       line=f"Resumed \u201c{root.name}\u201d" + (" from its checkpoint." if any(
                           t.checkpoint_id for t in paused) else "."))

    def amend_now(self, session_id: str, task_id: str, text: str, *, words: bool = True) -> Steered:
        """Join an amendment to a task (``words``: as the user said it, its cue left out): at its
        next step — a step is added when it asks for more —, by restarting the running step from
        its checkpoint, or when the paused task runs again (``steering.amend_effect``)."""
        book = self.tasks.books[session_id]
        root = root_task(book.stack, task_id)
        constraint = amendment(text) if words else " ".join(text.split())
        extra = added_step(constraint) if book.stack.steps(root.task_id) else None
        effect = NEXT_STEP if extra is not None else amend_effect(book.stack, root, set(book.live))
        changed = book.stack.amend(root.task_id, constraint)
        changed += book.stack.note(root.task_id, amended_note(constraint, effect))
        change: TaskChange | None
        if extra is not None:
            last = self._kept(book, root.task_id)
            change, persist = self.tasks.add_steps(session_id, root.task_id, [(extra.name, extra.acceptance,
                                                   [last[-1].task_id] if last else [])], op="amend", more=changed)
            self.tasks.write_now(persist)
            self.tasks.announce(session_id, change.tasks)
        else:
            change = self._commit_now(session_id, "amend", changed)
        if effect == RESTART and not root.paused:
            for handle in self._working(session_id, root.task_id):
                handle.steer = "restart"
                handle.stop("amended: restarting from the checkpoint")
        self.advance(session_id, root.task_id)
        said = {NEXT_STEP: "it takes effect at the next step", RESTART: "the running step restarts from its checkpoint",
                ON_RESUME: "it takes effect when the task runs again"}[effect]
        return Steered(session_id, book.stack.get(root.task_id), change, effect,
                       f"Amended \u201c{root.name}\u201d: {constraint} \u2014 {said}.")

    def cancel_now(self, session_id: str, task_id: str, reason: str = "cancelled by the user") -> Steered:
        """Fail a task and its open steps; their streams stop, queued ones are withdrawn."""
        book = self.tasks.books[session_id]
        root = root_task(book.stack, task_id)
        if root.status in FINAL:
            raise TaskError(f"task \u201c{root.name}\u201d is {root.status.value} already")
        changed = book.stack.fail(root.task_id, reason)
        self.tasks.stop_failed(book, changed, reason)
        self._stop_queued(session_id, [t.task_id for t in changed], reason)
        change = self._commit_now(session_id, "cancel", changed)
        self._release_waiting(session_id, root.task_id)
        return Steered(session_id, book.stack.get(root.task_id), change, line=f"Cancelled \u201c{root.name}\u201d.")

    def edit_steps(self, session_id: str, task_id: str, *, add: Sequence[tuple[str, str]],
                   rename: Mapping[int, str], remove: Sequence[int]) -> Steered:
        """Change a task's plan (one revision, ``edit``): steps that have not started are renamed or
        removed by number; new ones (name, acceptance) go at its end, after its last step."""
        book = self.tasks.books[session_id]
        root = root_task(book.stack, task_id)
        if root.status in FINAL:
            raise TaskError(f"task \u201c{root.name}\u201d is {root.status.value}: its steps cannot change")
        by_number = {s.step: s for s in book.stack.steps(root.task_id)}
        for number in [*rename, *remove]:
            if number not in by_number:
                raise TaskError(f"task \u201c{root.name}\u201d has no step {number}")
        changed: list[Task] = []
        for number, name in rename.items():
            changed += book.stack.rename(by_number[number].task_id, " ".join(name.split()))
        for number in remove:
            changed += book.stack.drop_step(by_number[number].task_id, "removed from the plan by the user")
        kept = self._kept(book, root.task_id)
        rows: list[tuple[str, str, Sequence[int | str]]] = []
        for n, (name, acceptance) in enumerate(add):
            rows.append((" ".join(name.split()), acceptance or "it is done and written out",
                         [n] if n else ([kept[-1].task_id] if kept else [])))
        change, persist = self.tasks.add_steps(session_id, root.task_id, rows, op="edit", more=changed)
        self.tasks.write_now(persist)
        self.tasks.announce(session_id, change.tasks)
        self.advance(session_id, root.task_id)
        return Steered(session_id, book.stack.get(root.task_id), change,
                       line=f"The plan of \u201c{root.name}\u201d has {len(self._kept(book, root.task_id))} steps.")

    @staticmethod
    def _kept(book: TaskBook, root_id: str) -> list[Task]:
        """A plan's steps but those removed before they ran."""
        return [s for s in book.stack.steps(root_id) if s.attempts or s.status != TaskStatus.FAILED]

    async def result_text(self, session_id: str, task_id: str) -> str:
        """The whole result of a completed task (its result evidence), else its checkpoint's text."""
        task = (await self.tasks.book(session_id)).stack.get(task_id)
        evidence_id = task.result_evidence_ids[0] if task.result_evidence_ids else task.checkpoint_id
        await self.load([evidence_id])
        return self._outputs.get(evidence_id or "", "")

    async def wait(self, session_id: str, task_id: str, timeout: float | None = None) -> Task:
        """Wait until a task is complete, failed or paused; return it."""
        book = self.tasks.books[session_id]
        settled: asyncio.Future[Task] = asyncio.get_running_loop().create_future()

        def check(sid: str, task: Task) -> None:
            if sid == session_id and task.task_id == task_id and (task.status in FINAL or task.paused):
                if not settled.done():
                    settled.set_result(task)

        self.tasks.task_updated.connect(check)
        try:
            check(session_id, book.stack.get(task_id))
            return await asyncio.wait_for(asyncio.shield(settled), timeout)
        finally:
            self.tasks.task_updated.disconnect(check)

    def note_event(self, session_id: str, task_id: str, event_id: str, amend: str | None) -> Steered | None:
        """An env event reached an open task: its next step's context shows it; ``amend`` (the
        event changed what the task reads) also amends it. None when the task is done."""
        book = self.tasks.books[session_id]
        root = root_task(book.stack, task_id)
        if root.status in FINAL:
            return None
        changed = book.stack.add_event(root.task_id, event_id)
        if changed:
            self._commit_now(session_id, "env", changed)
        if amend is None:
            return Steered(session_id, book.stack.get(root.task_id), None, line="")
        return self.amend_now(session_id, root.task_id, amend, words=False)

    # ------------------------------------------------------------------ revisions

    def _commit_now(self, session_id: str, op: str, changed: Sequence[Task]) -> TaskChange | None:
        """One revision of what the stack changed, handed to the store at once (no await)."""
        if not changed:
            return None
        change, persist = self.tasks.apply(session_id, op, changed)
        self.tasks.write_now(persist)
        self.tasks.announce(session_id, change.tasks)
        return change

    async def _commit(self, session_id: str, op: str, changed: Sequence[Task], *, evidences: Sequence[Evidence] = (),
                      handle: StreamHandle | None = None, nodes: Sequence[GraphNode] = (),
                      edges: Sequence[GraphEdge] = (), extra_attrs: dict[str, Any] | None = None) -> None:
        if not (changed or evidences or nodes):
            return
        change, persist = self.tasks.apply(session_id, op, changed, evidences=evidences, handle=handle, nodes=nodes,
                                           edges=edges, extra_attrs=extra_attrs)
        await self.tasks.write_now(persist)
        self.tasks.announce(session_id, change.tasks)

