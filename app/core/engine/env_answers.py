"""The environment answers back: what an env event routed somewhere does next.

``EnvResponder`` hears every ingested batch (``EnvironmentService.env_ingested``) and, per event:

- routed to an open task (``EnvRouted.task_id``): the event joins the task's events, so its next
  step's context shows it ("Changed meanwhile: …"); when the task names the file or feed (routed
  by mention: the event changed what the task reads) it also amends the task — "report.md
  changed: <its text>" joins its constraints and acts at its next step, or restarts the running
  step from its checkpoint (``TaskAgent.note_event``);
- routed to a branch nobody works on (a turn, or a task that ended), per ``EngineConfig.proactive``:
  "notify" leaves a notice on that branch (``env.noticed`` in the event log, ``noticed`` emitted
  for the window's status bar; the event's node and ``references`` edge are on the canvas
  already), "answer" queues a short answer by the chat model anchored there, written by the agent
  ("What changed in report.md, and what does it mean here?", at most ``proactive_max_tokens``),
  "off" nothing more.

Events in the environment lane (routed nowhere) are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.core.engine.agent import TaskAgent
from app.core.engine.context import EngineContext
from app.core.engine.environment import EnvRouted
from app.core.engine.tasks import TaskService
from app.core.routing.environment import env_title, event_text
from app.core.runtime.background import spawn
from app.core.runtime.scheduler import SessionScheduler
from app.core.signals import Signal
from app.core.tasks.stack import FINAL
from app.core.tasks.steering import root_task

log = logging.getLogger(__name__)

AMEND_CHARS = 240  # of the event's text an amendment carries
PROACTIVE_MODES = ("off", "notify", "answer")


@dataclass(frozen=True)
class Noticed:
    """An env event relevant to an idle branch: where (the branch's node), what, and how PCM
    responded ("notify": a notice; "answer": the stream of the answer it queued)."""

    session_id: str
    event_id: str
    node_id: str
    line: str
    mode: str
    stream_id: str | None = None


def amendment_of(routed: EnvRouted) -> str:
    """The amendment an event that changed a task's input makes: what changed and its new text."""
    text = " ".join(event_text(routed.event).split())
    text = text[:AMEND_CHARS].rstrip() + (" \u2026" if len(text) > AMEND_CHARS else "")
    change = str(routed.event.payload.get("change") or "changed")
    name = routed.event.title or env_title(routed.event)
    return f"{name} {'changed' if change == 'modified' else change}: {text or '(no text)'}"


class EnvResponder:
    """See the module doc."""

    def __init__(self, ctx: EngineContext, tasks: TaskService, agent: TaskAgent,
                 scheduler: Callable[[str], SessionScheduler]) -> None:
        self.ctx, self.tasks, self.agent, self._scheduler = ctx, tasks, agent, scheduler
        self.noticed: Signal[[Noticed]] = Signal("noticed")

    def on_env_ingested(self, session_id: str, routed: Sequence[EnvRouted]) -> None:
        for item in routed:
            try:
                if not self._to_task(session_id, item):
                    self._to_branch(session_id, item)
            except Exception:  # noqa: BLE001 - the events are stored; a response that fails is logged
                log.exception("responding to env event %s failed", item.event.event_id)

    def _to_task(self, session_id: str, item: EnvRouted) -> bool:
        """An event routed to an open task: its next step sees it, and it amends the task when
        the task names what changed. False when the task is done (its branch is idle)."""
        book = self.tasks.books.get(session_id)
        if item.task_id is None or book is None or item.task_id not in book.stack:
            return False
        if root_task(book.stack, item.task_id).status in FINAL:
            return False
        amend = amendment_of(item) if item.how == "mention" and item.event.kind in ("file", "feed", "api") else None
        self.agent.note_event(session_id, item.task_id, item.event.event_id, amend)
        return True

    def _to_branch(self, session_id: str, item: EnvRouted) -> None:
        mode = self.ctx.config.proactive
        state = self.ctx.sessions.get(session_id)
        if mode not in ("notify", "answer") or item.target_node is None or state is None:
            return
        anchor = self._turn_node(session_id, item)
        if anchor is None:
            return
        title = item.event.title or env_title(item.event)
        stream_id = None
        if mode == "answer" and self.ctx.chat is not None:
            handle = self._scheduler(session_id).submit(
                f"What changed in {title}, and what does it mean here?", anchor_override=anchor,
                by_agent=True, answer_cap=self.ctx.config.proactive_max_tokens)
            stream_id = handle.stream_id
        line = f"{title} changed; it concerns this branch" + (" \u2014 answering." if stream_id else ".")
        noticed = Noticed(session_id, item.event.event_id, anchor, line, mode if stream_id else "notify", stream_id)
        spawn(self.ctx.on_store(self.ctx.store.append_event, session_id, "env.noticed", {
            "event_id": item.event.event_id, "node_id": anchor, "mode": noticed.mode, "stream_id": stream_id,
            "line": line}), name="log env.noticed")
        self.noticed.emit(noticed)

    def _turn_node(self, session_id: str, item: EnvRouted) -> str | None:
        """The turn node of the branch an event reached: the turn itself, or the turn of the task."""
        state = self.ctx.sessions[session_id]
        if item.target_kind == "turn":
            return item.target_node
        book = self.tasks.books.get(session_id)
        if item.task_id is None or book is None or item.task_id not in book.stack:
            return None
        task = root_task(book.stack, item.task_id)
        return state.node_of(task.turn_id) if task.turn_id else None
