"""Environment intake: the loop-side half of the sensors (DESIGN.md §3).

Sensors run on their own threads and only call :meth:`EnvIntake.put` with a :class:`RawChange`.
``put`` appends to a bounded inbox and, at most once per drain, schedules a wake-up on the loop;
it never blocks and never touches a store. On the loop the intake

1. drains the inbox in chunks (so a 10,000-change burst never holds the loop for long),
2. coalesces changes per key (file path, feed entry, API value) in a bounded *pending* map: all
   changes of one key within ``coalesce_ms`` of its first change become one event, whose change
   kind is decided by :data:`MERGE_RULES` (created + modified + modified → created),
3. optionally *prepares* each coalesced change on an executor (the composition root passes the
   sensors' file reader, so a file's text is read once per event, after its window, off the loop),
4. hands batches of at most ``max_batch`` :class:`~app.core.types.EnvEvent` to the async handler
   (the engine's ``ingest_env``), one batch at a time.

Memory stays bounded: the inbox holds at most ``max_inbox`` raw changes (beyond that ``put``
drops and returns ``False``, so a sensor can ask for a rescan), the pending map at most
``max_pending`` keys (when it is full the oldest keys are flushed early instead of growing), and
one batch is in flight. Backpressure is coalescing plus early flushing, never an unbounded list.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from app.core.text.names import from_lossless_hex, lossless_hex, safe_text
from app.core.types import EnvEvent, utc_now

log = logging.getLogger(__name__)

ChangeKind = Literal["file", "feed", "api"]
EnvHandler = Callable[[list[EnvEvent]], Awaitable[None]]
Preparer = Callable[["RawChange"], "RawChange"]


@dataclass(frozen=True, slots=True)
class RawChange:
    """One change as a sensor saw it, before coalescing.

    ``key`` identifies what changed (a file path, ``feed:<url>#<entry id>``, ``api:<url>#<path>``);
    changes with the same key coalesce. ``change`` says what happened: files use
    ``created | modified | deleted | moved | rescan``, feeds ``new | error``, APIs
    ``initial | changed | error``. ``payload`` carries the sensor's details (sizes, old/new value,
    ``src_path`` of a move, ``rescan: True``); ``at`` is the UTC ISO time the sensor saw it.
    """

    key: str
    kind: ChangeKind
    source: str
    uri: str = ""
    change: str = "modified"
    title: str = ""
    content: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    at: str = field(default_factory=utc_now)


# (earlier change, later change) → the change kind of the coalesced event; None cancels the key
# (a file created and deleted within one window never existed as far as the session is concerned).
# Pairs not listed: the later change wins.
MERGE_RULES: dict[tuple[str, str], str | None] = {
    ("created", "modified"): "created",
    ("created", "moved"): "created",
    ("created", "deleted"): None,
    ("moved", "modified"): "moved",
    ("deleted", "created"): "modified",  # replaced in place (delete + write, e.g. some editors)
    ("deleted", "moved"): "modified",  # replaced by a rename (atomic save)
    ("deleted", "modified"): "modified",
}


def merge_change(earlier: str, later: str, rules: dict[tuple[str, str], str | None] = MERGE_RULES) -> str | None:
    """The change kind of two coalesced changes, or ``None`` when they cancel out."""
    return rules.get((earlier, later), later)


@dataclass(slots=True)
class _Pending:
    """A key's coalesced state: the change kind so far, the latest raw change, how many merged."""

    change: str
    last: RawChange
    count: int
    first_seen: float  # monotonic; the key's window ends coalesce_ms after this


@dataclass(frozen=True, slots=True)
class IntakeStats:
    """A snapshot of the intake counters (see :meth:`EnvIntake.stats`)."""

    raw: int  # changes accepted by put()
    events: int  # events handed to the handler
    batches: int
    dropped: int  # put() refused: inbox full or intake stopped
    cancelled: int  # keys whose changes cancelled out (created + deleted in one window)
    forced: int  # keys flushed before their window ended because the pending map was full
    rescans: int  # rescan markers seen (a sensor re-read a folder after lost events)
    handler_errors: int
    lost: int  # events of batches the handler failed on every retry (it logs them)
    prepare_errors: int
    inbox: int  # raw changes waiting for the loop
    pending: int  # keys waiting for their window
    max_inbox_seen: int
    max_pending_seen: int

    @property
    def ratio(self) -> float:
        """Raw changes per emitted event (the coalescing factor)."""
        return self.raw / self.events if self.events else 0.0


class EnvIntake:
    """Coalesces sensor changes on the loop and hands them, batched, to ``handler``.

    ``start()`` must be called on the running loop; ``put()`` may be called from any thread before
    or after; ``await stop()`` flushes everything still pending (windows cut short) and returns
    when the handler has seen it.

    ``coalesce_ms``: a key's window, from its first change. ``max_batch``: events per handler
    call. ``max_pending``/``max_inbox``: the memory bounds (keys waiting for their window / raw
    changes waiting for the loop). ``drain_chunk``: raw changes merged per loop callback (keeps
    loop lag low during a burst). ``min_flush_interval_ms``: least time between two batches
    unless the pending map is full, so a burst leaves in few large batches. ``prepare``: a
    blocking function run per coalesced change on ``prepare_executor`` (default: a private
    one-thread pool), e.g. ``app.sensors.make_preparer(max_file_bytes)`` to read file text.
    A batch the handler raises on is handed to it again up to ``handler_retries`` times
    (``retry_delay_s`` apart, growing); the engine's handler isolates a failing event itself,
    so this covers a handler that fails as a whole. What still fails is counted as ``lost``.
    """

    def __init__(
        self,
        handler: EnvHandler,
        *,
        coalesce_ms: int = 500,
        max_batch: int = 200,
        max_pending: int = 5_000,
        max_inbox: int = 50_000,
        drain_chunk: int = 1_000,
        min_flush_interval_ms: int = 50,
        prepare: Preparer | None = None,
        prepare_executor: Executor | None = None,
        merge_rules: dict[tuple[str, str], str | None] | None = None,
        handler_retries: int = 2,
        retry_delay_s: float = 0.2,
    ) -> None:
        if max_batch < 1 or max_pending < 1 or max_inbox < 1 or drain_chunk < 1:
            raise ValueError("max_batch, max_pending, max_inbox and drain_chunk must be positive")
        self._handler = handler
        self._window = max(0, coalesce_ms) / 1000.0
        self._max_batch = max_batch
        self._max_pending = max_pending
        self._max_inbox = max_inbox
        self._drain_chunk = drain_chunk
        self._min_interval = max(0, min_flush_interval_ms) / 1000.0
        self._last_emit = 0.0
        self._prepare = prepare
        self._own_executor = prepare is not None and prepare_executor is None
        self._executor: Executor | None = prepare_executor
        self._rules = MERGE_RULES if merge_rules is None else merge_rules
        self._handler_retries = max(0, handler_retries)
        self._retry_delay_s = max(0.0, retry_delay_s)

        self._inbox: deque[RawChange] = deque()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_scheduled = False  # a _drain is already scheduled on the loop
        self._stopped = False
        self._stalled = False  # the pending map is full: flush the oldest keys early
        self._flush_now = False  # stop(): flush everything regardless of windows
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()  # guards the counters and the wake flag put() shares with the loop

        self._raw = 0
        self._dropped = 0
        self._events = 0
        self._batches = 0
        self._cancelled = 0
        self._forced = 0
        self._rescans = 0
        self._handler_errors = 0
        self._lost = 0
        self._prepare_errors = 0
        self._max_inbox_seen = 0
        self._max_pending_seen = 0

    # ------------------------------------------------------------------ any thread

    def put(self, change: RawChange) -> bool:
        """Enqueue ``change``; safe from any thread, O(1), never waits on the loop or a store
        (it holds an uncontended lock for a few operations to keep the counters exact).

        Returns ``False`` when the change was dropped (inbox full or intake stopped): a sensor that
        sees ``False`` knows it lost a change and may rescan later.
        """
        inbox = self._inbox
        with self._lock:
            if self._stopped or len(inbox) >= self._max_inbox:
                self._dropped += 1
                return False
            self._raw += 1
            inbox.append(change)
            if len(inbox) > self._max_inbox_seen:
                self._max_inbox_seen = len(inbox)
            schedule = not self._wake_scheduled and self._loop is not None
            if schedule:
                self._wake_scheduled = True
        if schedule:
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed (shutdown): nothing will drain it again
                with self._lock:
                    self._wake_scheduled = False
                    self._stopped = True
                return False
        return True

    def stats(self) -> IntakeStats:
        """A snapshot of the counters (cheap; safe from any thread)."""
        with self._lock:
            return IntakeStats(
                raw=self._raw, events=self._events, batches=self._batches, dropped=self._dropped,
                cancelled=self._cancelled, forced=self._forced, rescans=self._rescans,
                handler_errors=self._handler_errors, lost=self._lost, prepare_errors=self._prepare_errors,
                inbox=len(self._inbox), pending=len(self._pending),
                max_inbox_seen=self._max_inbox_seen, max_pending_seen=self._max_pending_seen,
            )

    @property
    def max_pending(self) -> int:
        return self._max_pending

    # ------------------------------------------------------------------ loop side

    def start(self) -> None:
        """Bind to the running loop and start the flusher; changes put before start are kept."""
        if self._task is not None:
            return
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if self._own_executor:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pcm-intake")
        self._task = loop.create_task(self._flusher(), name="env-intake")
        with self._lock:
            self._loop = loop
            self._wake_scheduled = True
        loop.call_soon(self._drain)

    async def stop(self) -> None:
        """Refuse further changes, flush everything queued or pending, and wait for the handler."""
        with self._lock:
            self._stopped = True
        if self._task is None:
            return
        self._flush_now = True
        self._drain()
        assert self._wake is not None
        self._wake.set()
        try:
            await self._task
        finally:
            self._task = None
            if self._own_executor and self._executor is not None:
                self._executor.shutdown(wait=False)

    def _drain(self) -> None:
        """Move up to ``drain_chunk`` raw changes from the inbox into the pending map."""
        with self._lock:
            self._wake_scheduled = False
        inbox, pending = self._inbox, self._pending
        was_empty = not pending
        now = time.monotonic()
        moved = 0
        while inbox and moved < self._drain_chunk:
            change = inbox[0]
            if change.key not in pending and len(pending) >= self._max_pending:
                self._stalled = True  # the flusher frees room, then drains again
                break
            inbox.popleft()
            moved += 1
            self._merge(change, now)
        if len(pending) > self._max_pending_seen:
            self._max_pending_seen = len(pending)
        if inbox and not self._stalled:
            # More than one chunk waiting: yield to other callbacks (UI, probes) between chunks.
            with self._lock:
                reschedule = not self._wake_scheduled
                self._wake_scheduled = True
            if reschedule and self._loop is not None:
                self._loop.call_soon(self._drain)
        if self._wake is not None and ((was_empty and pending) or self._stalled or self._flush_now):
            self._wake.set()

    def _merge(self, change: RawChange, now: float) -> None:
        if change.change == "rescan":
            self._rescans += 1
        kind, count = change.change, 1
        src_key = change.payload.get("src_key")
        if src_key and src_key != change.key:
            # A rename carries the source's pending changes to the destination: a file created
            # and renamed within one window is reported once, as created at its new path.
            src = self._pending.pop(src_key, None)
            if src is not None:
                count += src.count
                kind = merge_change(src.change, kind, self._rules) or kind
        entry = self._pending.get(change.key)
        if entry is None:
            self._pending[change.key] = _Pending(kind, change, count, now)
            return
        merged = merge_change(entry.change, kind, self._rules)
        if merged is None:
            del self._pending[change.key]
            self._cancelled += 1
            return
        entry.change = merged
        entry.last = change
        entry.count += count

    def _take_ready(self) -> list[tuple[str, _Pending]]:
        """Pop up to ``max_batch`` keys whose window ended (all of them when flushing or stalled).

        Between two batches at least ``min_flush_interval_ms`` pass (unless stalled or stopping),
        so keys whose windows end a few ms apart during a burst leave together, not one by one.
        """
        out: list[tuple[str, _Pending]] = []
        pending = self._pending
        now = time.monotonic()
        if now < self._last_emit + self._min_interval and not (self._stalled or self._flush_now):
            return out
        deadline = now - self._window
        while pending and len(out) < self._max_batch:
            key, entry = next(iter(pending.items()))
            if entry.first_seen > deadline and not self._flush_now:
                if not self._stalled:
                    break
                self._forced += 1
            out.append((key, entry))
            del pending[key]
        return out

    def _next_timeout(self) -> float | None:
        if not self._pending:
            return None
        first = next(iter(self._pending.values()))
        due = max(first.first_seen + self._window, self._last_emit + self._min_interval)
        return max(0.0, due - time.monotonic())

    async def _flusher(self) -> None:
        assert self._wake is not None
        while True:
            ready = self._take_ready()
            if ready:
                await self._emit(ready)
                if self._stalled:
                    self._stalled = False
                    self._drain()
                # A handler that never awaits would otherwise keep the loop for the whole burst.
                await asyncio.sleep(0)
                continue
            if self._flush_now:
                if self._inbox:
                    self._drain()
                    continue
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self._next_timeout())
            except TimeoutError:
                pass

    async def _emit(self, ready: Sequence[tuple[str, _Pending]]) -> None:
        self._last_emit = time.monotonic()
        changes = [
            replace(e.last, change=e.change, payload={**e.last.payload, "raw_changes": e.count})
            for _, e in ready
        ]
        if self._prepare is not None:
            loop = asyncio.get_running_loop()
            changes = await loop.run_in_executor(self._executor, self._prepare_all, changes)
        events = [to_event(c) for c in changes]
        for attempt in range(self._handler_retries + 1):
            try:
                await self._handler(events)
                break
            except Exception:  # the handler's failure must not stop the sensors' intake
                log.exception("environment handler failed on a batch of %d events (attempt %d)", len(events), attempt + 1)
                self._handler_errors += 1
                if attempt == self._handler_retries:
                    with self._lock:
                        self._lost += len(events)
                    break
                await asyncio.sleep(self._retry_delay_s * (attempt + 1))
        with self._lock:
            self._events += len(events)
            self._batches += 1

    def _prepare_all(self, changes: list[RawChange]) -> list[RawChange]:
        """Runs on the executor: the preparer per change; a failure keeps the change unprepared."""
        assert self._prepare is not None
        out: list[RawChange] = []
        for change in changes:
            try:
                out.append(self._prepare(change))
            except Exception as exc:  # noqa: BLE001 - one unreadable file must not lose the batch
                self._prepare_errors += 1
                out.append(replace(change, payload={**change.payload, "prepare_error": repr(exc)}))
        return out


def _safe(value: Any) -> Any:
    """``value`` with every string made storable (``safe_text``), in dicts and lists too."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(str(k)): _safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(v) for v in value]
    return value


def to_event(change: RawChange) -> EnvEvent:
    """The :class:`EnvEvent` of a coalesced change; ``payload`` gains ``change`` and ``key``.

    Every string is made storable: a file name that is not valid UTF-8 (``os.fsdecode`` keeps
    its bytes as lone surrogates, which SQLite, LanceDB and the embedder refuse) is written out
    with ``\\xNN`` escapes for display, and the exact name is kept in ``payload["raw_uri"]``
    (and ``raw_src_path`` for a move; :func:`raw_uri` gives it back), so nothing is lost and one
    odd name can never fail the batch it arrives in.
    """
    payload: dict[str, Any] = {**change.payload, "change": change.change, "key": change.key}
    raw = {name: hexed for name, value in (("raw_uri", change.uri), ("raw_src_path", payload.get("src_path")))
           if isinstance(value, str) and (hexed := lossless_hex(value)) is not None}
    return EnvEvent(
        kind=change.kind,
        source=safe_text(change.source),
        uri=safe_text(change.uri),
        title=safe_text(change.title),
        content=safe_text(change.content),
        payload={**_safe(payload), **raw},
        at=change.at,
    )


def raw_uri(event: EnvEvent) -> str:
    """The exact path (or URI) of an event as the sensor saw it: ``event.uri``, or for a name
    that was not valid UTF-8 the original ``os.fsdecode`` string (``os.fsencode`` of it gives
    the name's bytes back)."""
    hexed = event.payload.get("raw_uri")
    return from_lossless_hex(hexed) if isinstance(hexed, str) else event.uri


def storable(event: EnvEvent) -> EnvEvent:
    """``event`` with every string made storable as :func:`to_event` makes them (the exact uri
    kept in ``payload["raw_uri"]``); the event itself when it already is."""
    payload = _safe(event.payload)
    texts = (event.source, event.uri, event.title, event.content)
    if payload == event.payload and not any(lossless_hex(t) for t in texts):
        return event
    raw = lossless_hex(event.uri)
    if raw is not None:
        payload.setdefault("raw_uri", raw)
    return event.model_copy(update={"source": safe_text(event.source), "uri": safe_text(event.uri),
                                    "title": safe_text(event.title), "content": safe_text(event.content),
                                    "payload": payload})
