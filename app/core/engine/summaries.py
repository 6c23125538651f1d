"""Summaries: the background service that keeps each subject's summaries up to date.

Cued like the memory writer (``EngineContext.answered`` after each answered turn,
``EngineContext.ingested`` after a history import), it updates, for the session, each branch,
each task and each main topic (``app.core.memory.summary_subjects``), the summaries at three levels from the previous
version and the new turns (one part per update; nothing is regenerated). It is a background
task at low priority: one update at a time, after a yield, never while a history import runs
(``SessionService.behind_ingest``), and only once ``summary_every`` new messages wait (``flush``
updates whatever waits).

Who writes a level's text: at the detailed level (``MODEL_LEVELS``) and for a topic, the
extractive summarizer (a topic's turns are scattered over the session: the model's time goes to
the session, branches and tasks, which contexts use); otherwise the chat model, asked only when
no other model call is running (``Executors.llm_calls``) and none has for ``summary_quiet_s``,
as a background call that any other call stops within one token (a prompt input is never kept
waiting), within ``summary_timeout_s``; its text must keep the identifiers the extractive
summary keeps (``model_valid``). Otherwise — no model, busy, stopped, late, failed or invalid —
the extractive summarizer writes it. Each outcome is counted. The service yields to the loop
before each level's text, so a prompt input waits for one piece at most.

A cache keyed by (subject, level, based_on, the new part's ids) finds the summary of an unchanged
subject again (in memory, else in the store) instead of computing it; hits and misses are
counted. ``current(session_id)`` is what builds read: the latest version of every subject.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.context.sections.history import part_words
from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.memory.summaries import LEVELS, SummaryTurn, extractive, model_valid
from app.core.memory.summary_subjects import (
    LEVEL_TOKENS,
    MODEL_LEVELS,
    Made,
    Subject,
    cache_key,
    new_parts,
    next_record,
    subjects_of,
    summary_messages,
)
from app.core.pipeline.summary_items import default_views
from app.core.ports import GenerationParams
from app.core.runtime.background import spawn
from app.core.runtime.executors import ChatStream
from app.core.session.state import SessionState
from app.core.text.words import RANKING
from app.core.types import Ablation, Message, SummaryRecord

#: Summary versions the service keeps in memory by cache key (the store keeps every one).
CACHE_SIZE = 256
READ_SLICE = 500  # summary parts quoted ahead between two turns of the loop (``preload``)


@dataclass
class SummaryStats:
    """What the service did: cache hits and misses, who wrote each level, generation times (of
    every part, and of the model's calls alone)."""

    hits: int = 0
    misses: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # "model" | "busy" | "stopped" | "late" | ...
    gen_ms: dict[str, list[float]] = field(default_factory=lambda: {level: [] for level in LEVELS})
    # of the parts the model wrote (valid or not): from asking to its last token, by level
    model_ms: dict[str, list[float]] = field(default_factory=lambda: {level: [] for level in LEVELS})


class SummaryService:
    """See the module docstring."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, topics: Callable[[str], dict[str, list[str]]],
                 *, enabled: bool = True) -> None:
        self.ctx, self.sessions, self.enabled = ctx, sessions, enabled
        self.topics = topics  # a session's main topics (topic id → message ids): ``MemoryService.topic_messages``
        # Builds are offered branch summaries when the service was made enabled (a benchmark that
        # switches the updates off later keeps the offer, as it always did).
        self._offers = enabled
        self.stats = SummaryStats()
        self._latest: dict[str, dict[tuple[str, str, str], SummaryRecord]] = {}  # session → (kind, id, level) → record
        # The versions written or read lately, by cache key (at most ``CACHE_SIZE``; the store holds
        # them all): every version of a long chain kept here held ~20 GB after a 100,000-turn import.
        self._cache: dict[str, SummaryRecord] = {}
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[Any]] = set()
        self._made: dict[tuple[str, str, tuple[str, ...]], Made] = {}
        self._key_sentences: dict[tuple[str, ...], str] = {}  # the current part's (``_said``)
        ctx.answered.connect(self._on_answered)
        ctx.ingested.connect(self._on_ingested)

    # ------------------------------------------------------------------ cues

    def _on_answered(self, session_id: str, turn_id: str, message: Message, answer: Message) -> None:
        del turn_id, message, answer
        if self.enabled:
            self.start(session_id)

    def _on_ingested(self, session_id: str, messages: list[Message]) -> None:
        if self.enabled and messages:
            self.start(session_id)

    def start(self, session_id: str, *, flush: bool = False) -> None:
        """Update the session's summaries in the background (kept until done; see ``idle``)."""
        task = spawn(self._update(session_id, flush, None), name=f"summaries {session_id}")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def idle(self) -> None:
        """Wait until every update started so far is done."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    def current(self, session_id: str) -> list[SummaryRecord]:
        """The latest summary of every subject of the session at every level (as loaded or made)."""
        return list(self._latest.get(session_id, {}).values())

    def offer(self, session_id: str) -> Mapping[str, Mapping[str, SummaryRecord]]:
        """The branch summaries of the session a build may use now (``branches``): none when the
        service was made disabled or summaries are ablated (``Ablation.SUMMARIES`` in ``EngineConfig.ablate``)."""
        if not self._offers or Ablation.SUMMARIES in self.ctx.config.ablate:
            return {}
        return self.branches(session_id)

    def branches(self, session_id: str) -> dict[str, dict[str, SummaryRecord]]:
        """The current branch summaries of the session: root node → level → summary."""
        if session_id not in self._latest and self.enabled:  # not read since the start: read it for the next build
            spawn(self._load(session_id), name=f"summaries load {session_id}")
        out: dict[str, dict[str, SummaryRecord]] = {}
        for (kind, subject_id, level), record in self._latest.get(session_id, {}).items():
            if kind == "branch":
                out.setdefault(subject_id, {})[level] = record
        return out

    async def replay(self, session_id: str) -> list[SummaryRecord]:
        """Go through every update of the session's summaries again from the first (the in-memory
        cache dropped): unchanged ones are found by their cache key in the store, not computed
        (``pcm eval summaries`` measures the hit rate so); return the versions written anew."""
        await self.idle()
        self._latest[session_id] = {}
        self._cache.clear()
        return await self.update(session_id, flush=True)

    # ------------------------------------------------------------------ the update

    async def update(self, session_id: str, *, flush: bool = False) -> list[SummaryRecord]:
        """Bring every subject of the session up to date; return the new versions written."""
        written: list[SummaryRecord] = []
        await self._update(session_id, flush, written)
        return written

    async def _update(self, session_id: str, flush: bool, written: list[SummaryRecord] | None) -> None:
        """``update``, adding the versions written to ``written`` (None: not kept — the background
        updates, which after an import write thousands of versions, each holding its chain)."""
        async with self._lock:
            await asyncio.sleep(0)  # behind whatever the loop has queued: prompt inputs go first
            state = self.ctx.sessions.get(session_id) or await self.sessions.open(session_id)
            latest = await self._load(session_id)
            every = 1 if flush else max(1, self.ctx.config.summary_every)
            # (level, previous text, part) → text: a branch that is the whole session is summarized once
            self._made = {}
            topics = self.topics(session_id)
            for subject in subjects_of(state, topics):
                last = latest.get((subject.kind, subject.subject_id, "brief"))
                parts = new_parts(subject.turns, last.covers.last if last else None)
                if sum(len(p) for p in parts) < every:
                    continue
                for part in parts:
                    await self.sessions.behind_ingest()  # a history import's chunks go first
                    made = await self._advance(session_id, subject, part, latest)
                    if written is not None:
                        written += made

    async def preload(self, state: SessionState) -> None:
        """Read the session's current summaries now (a session just opened), so its first build
        is offered them: ``branches`` only starts the read, for the build after. Their parts'
        texts are then quoted and split into words as the history section shows them (at 100,000
        turns, 3,000 parts: ~300 ms the first build would spend), a slice at a time, the words
        of each part at the levels a build shows them at are indexed (``part_words``), and each
        record's JSON, which a build's record keeps (``as_json``), is made."""
        if not self.enabled:
            return
        await self._load(state.session_id)
        texts = list(dict.fromkeys(part[level] for levels in self.branches(state.session_id).values()
                                   for record in levels.values() for part in record.parts
                                   for level in LEVELS if isinstance(part.get(level), str)))
        for start in range(0, len(texts), READ_SLICE):
            for text in texts[start:start + READ_SLICE]:
                RANKING.content(state.quoted(text))
            await asyncio.sleep(0)  # the loop's other work (an input) goes between slices
        for record, levels in default_views(self.offer(state.session_id)):
            part_words(state, record, levels)  # ~36 ms a record at 100,000 turns
            await asyncio.sleep(0)
        for by_level in self.branches(state.session_id).values():
            for record in by_level.values():
                record.as_json()  # ~20 ms a record at 100,000 turns
                await asyncio.sleep(0)

    async def _load(self, session_id: str) -> dict[tuple[str, str, str], SummaryRecord]:
        if session_id not in self._latest:
            stored = await self.ctx.on_store(self.ctx.store.list_summaries, session_id)
            self._latest[session_id] = {(s.subject, s.subject_id, s.level): s for s in stored}
        return self._latest[session_id]

    async def _advance(self, session_id: str, subject: Subject, part: Sequence[SummaryTurn],
                       latest: dict[tuple[str, str, str], SummaryRecord]) -> list[SummaryRecord]:
        """One update of ``subject`` by ``part`` at every level (found in the cache, or made)."""
        previous = {level: latest.get((subject.kind, subject.subject_id, level)) for level in LEVELS}
        ids = [t.message_id for t in part]
        keys = {level: cache_key(subject.kind, subject.subject_id, level, ids,
                                 p.summary_id if (p := previous[level]) else None) for level in LEVELS}
        found = {level: await self._cached(keys[level]) for level in LEVELS}
        if all(found.values()):
            self.stats.hits += len(LEVELS)
            for level in LEVELS:
                latest[(subject.kind, subject.subject_id, level)] = found[level]  # type: ignore[assignment]
            return []
        self.stats.misses += len(LEVELS)
        texts: dict[str, str] = {}
        made: dict[str, Made] = {}
        for level in LEVELS:
            before = p.content if (p := previous[level]) else ""
            same = (level, before, tuple(ids))
            if same not in self._made:
                self._made[same] = await self._text(level, before, part,
                                                    model=subject.kind != "topic" and level in MODEL_LEVELS)
            made[level] = self._made[same]
            texts[level] = made[level].text
        records = [next_record(previous[level], subject, level, part, texts, made[level], key=keys[level],
                               tokens=self.ctx.counter.count) for level in LEVELS]

        def write() -> None:
            with self.ctx.store.transaction():
                for record in records:
                    self.ctx.store.add_summary(session_id, record)

        await self.ctx.on_store(write)
        for record in records:
            latest[(subject.kind, subject.subject_id, record.level)] = record
            self._remember(record)
        return records

    async def _cached(self, key: str) -> SummaryRecord | None:
        if key in self._cache:
            return self._cache[key]
        record = await self.ctx.on_store(self.ctx.store.summary_by_key, key)
        if record is not None:
            self._remember(record)
        return record

    def _remember(self, record: SummaryRecord) -> None:
        """Keep ``record`` among the lately written or read versions, the oldest going past ``CACHE_SIZE``."""
        self._cache.pop(record.cache_key, None)
        self._cache[record.cache_key] = record
        while len(self._cache) > CACHE_SIZE:
            del self._cache[next(iter(self._cache))]

    # ------------------------------------------------------------------ one level's text

    async def _text(self, level: str, previous: str, part: Sequence[SummaryTurn], *, model: bool = True) -> Made:
        """The part's text at ``level``: the model's when it may and does well, else extractive."""
        await asyncio.sleep(0)  # a piece at a time: a prompt input waiting on the loop goes first
        started = time.perf_counter()
        said = self._said(part)  # the part's key sentences: the standard level's text and the model's input
        reference = said if level == "standard" else extractive(part, level)
        outcome, text, usage = await self._ask_model(level, previous, said) if model else ("extractive", "", None)
        if outcome == "model" and not model_valid(text, part, level, reference):
            outcome = "invalid"
        self.stats.outcomes[outcome] += 1
        self.stats.gen_ms[level].append((time.perf_counter() - started) * 1000)
        if outcome == "model" and usage is not None:
            return Made(text.strip(), usage[0], usage[1])
        return Made(reference, "extractive")

    def _said(self, part: Sequence[SummaryTurn]) -> str:
        """The part's extractive standard summary, made once per part (every level reads it)."""
        key = tuple(t.message_id for t in part)
        if key not in self._key_sentences:
            self._key_sentences = {key: extractive(part, "standard")}  # one part at a time
        return self._key_sentences[key]

    async def _model_quiet(self) -> bool:
        """Wait until no model call has run for ``summary_quiet_s`` (inputs come in bursts: the
        next one finds the model free, not reading a summary's prompt, which cannot stop halfway);
        False when a call is running."""
        ex = self.ctx.ex
        while ex.llm_calls == 0:
            wait = ex.foreground_done + self.ctx.config.summary_quiet_s - time.monotonic()
            if wait <= 0:
                return True
            await asyncio.sleep(wait)
        return False

    async def _ask_model(self, level: str, previous: str, said: str) -> tuple[str, str, tuple[str, str] | None]:
        """(outcome, text, (provider, model)) of asking the chat model; never raises."""
        ctx = self.ctx
        if ctx.chat is None or ctx.config.summary_model != "auto":
            return "extractive", "", None
        if not await self._model_quiet():
            return "busy", "", None
        # A background call: any other model call (a prompt input) stops it within one token.
        stream = ChatStream(ctx.ex, ctx.chat, summary_messages(level, previous, said), stage="summary",
                            params=GenerationParams(max_tokens=LEVEL_TOKENS[level], temperature=0.0),
                            background=True)
        asked = time.perf_counter()
        try:
            result = await asyncio.wait_for(stream.wait(), ctx.config.summary_timeout_s)
        except asyncio.TimeoutError:
            stream.stop()
            return "late", "", None
        except Exception:  # noqa: BLE001 - a summary only ever falls back
            return ("stopped" if stream.cancel.cancelled else "error"), "", None
        if result.finish_reason == "cancelled":
            return "stopped", "", None
        if result.finish_reason not in ("stop", "length"):
            return "error", "", None
        self.stats.model_ms[level].append((time.perf_counter() - asked) * 1000)
        return "model", result.text, (result.usage.provider, result.usage.model)
