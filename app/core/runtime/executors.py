"""Named single-worker executors and the bridge from blocking model calls to the event loop.

DESIGN.md §3: one loop; blocking work goes to one single-worker executor per non-thread-safe
resource — ``llm`` (llama.cpp contexts are not thread-safe), ``embed`` and ``store`` (one SQLite
connection stays on one thread). Results come back with ``await loop.run_in_executor(...)``;
streamed tokens come back with ``loop.call_soon_threadsafe(queue.put_nowait, token)``.

Cutting in (interruptions): one model generates one reply at a time, so a question asked while
a long task streams would wait for the whole task. An ``urgent`` ``ChatStream`` is also put on the
``UrgentLane``; the generation running on the llm thread checks the lane after every token and,
when a call waits, sets its own state aside (``model.suspend()``, if the model has one: the
llama.cpp adapter copies its KV cache out and back, a few ms), runs the waiting call to its end
on the same thread, and continues exactly where it was. Whichever comes first — the cut-in or
the call's own turn on the pool — runs it; the other finds it taken.

Background calls (the memory writer's optional model signal): a ``background`` ``ChatStream``
gives way to every other one — creating a foreground stream stops each background call, queued
or running, within one token — so background work never holds up a prompt input.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from app.core.ports import CancelToken, ChatMessage, ChatModel, ChatResult, GenerationParams

T = TypeVar("T")

EXECUTOR_NAMES = ("llm", "embed", "store", "index", "upkeep")  # upkeep: the index's training and folding


class Executors:
    """Owns the single-worker pools; ``run(name, fn, *args)`` awaits ``fn`` on that pool."""

    def __init__(self, names: Sequence[str] = EXECUTOR_NAMES, workers: dict[str, int] | None = None) -> None:
        # LanceDB queries are thread-safe: the index pool may run the vector and full-text
        # channels side by side. Every other resource gets exactly one thread.
        workers = {"index": 2} if workers is None else workers
        self._pools = {
            name: ThreadPoolExecutor(max_workers=workers.get(name, 1), thread_name_prefix=f"pcm-{name}")
            for name in names
        }
        self.urgent = UrgentLane()  # chat calls that may cut into the running generation
        self.background: set[ChatStream] = set()  # calls that stop when any other one starts
        # Chat calls started and not finished yet (on the loop): background work that may use the
        # model (summaries) starts only when none is, and stops its own once another arrives.
        self.llm_calls = 0
        self.foreground_done = 0.0  # ``time.monotonic()`` when the last foreground call settled

    def pool(self, name: str) -> ThreadPoolExecutor:
        return self._pools[name]

    def admit(self, stream: ChatStream, *, background: bool) -> None:
        """Count a new chat call (on the loop); a foreground one stops every background call."""
        self.llm_calls += 1
        if background:
            self.background.add(stream)
        else:
            for other in list(self.background):
                other.stop()

    def release(self, stream: ChatStream) -> None:
        """A chat call settled (on the loop)."""
        self.llm_calls -= 1
        if stream not in self.background:
            self.foreground_done = time.monotonic()
        self.background.discard(stream)

    async def run(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        call = functools.partial(fn, *args, **kwargs) if kwargs else functools.partial(fn, *args)
        return await loop.run_in_executor(self._pools[name], call)

    def shutdown(self, *, wait: bool = True) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=wait, cancel_futures=True)


class _Call:
    """A chat call that runs once: by its own turn on the pool or cut in by a running generation."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._taken = False

    def claim(self) -> bool:
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True

    def run_if_unclaimed(self) -> None:
        if self.claim():
            self._fn()


class UrgentLane:
    """Calls waiting to cut into the generation running on the llm thread (see the module doc)."""

    def __init__(self) -> None:
        self._waiting: deque[_Call] = deque()
        self._lock = threading.Lock()
        self._cutting = False  # only touched on the llm thread: cut-ins do not nest
        self.cut_ins = 0  # calls run by cutting in (diagnostics, benchmarks)

    def push(self, call: _Call) -> None:
        with self._lock:
            self._waiting.append(call)

    def _pop(self) -> _Call | None:
        with self._lock:
            return self._waiting.popleft() if self._waiting else None

    def cut_in(self, running_model: object) -> int:
        """Run every waiting call now, the running generation set aside; return how many ran.

        Called on the llm thread from a generation's token callback.
        """
        if self._cutting or not self._waiting:
            return 0
        claimed: list[_Call] = []
        while (call := self._pop()) is not None:
            if call.claim():
                claimed.append(call)
        if not claimed:
            return 0
        suspend = getattr(running_model, "suspend", None)
        self._cutting = True
        try:
            with suspend() if callable(suspend) else contextlib.nullcontext():
                for call in claimed:
                    call._fn()
                    self.cut_ins += 1
        finally:
            self._cutting = False
        return len(claimed)


_DONE = object()


class ChatStream:
    """One streamed chat call: iterate it for tokens, then read ``result``.

    The call runs on the ``llm`` executor; each token crosses to the loop with
    ``call_soon_threadsafe``. ``stop()`` cancels within one token. An ``urgent`` call may also
    run by cutting into the generation in progress (module doc), so it starts within one token
    of that generation instead of after it; every call lets urgent ones cut in. ``on_result``
    hears the finished call's result on the loop, also when its awaiter gave up waiting (the
    engine records every call's usage with it).
    """

    def __init__(
        self,
        executors: Executors,
        model: ChatModel,
        messages: Sequence[ChatMessage],
        *,
        params: GenerationParams | None = None,
        stage: str = "answer",
        json_schema: dict[str, Any] | None = None,
        urgent: bool = False,
        background: bool = False,
        on_result: Callable[[ChatResult], None] | None = None,
    ) -> None:
        self.cancel = CancelToken()
        executors.admit(self, background=background)
        self.result: ChatResult | None = None
        self.urgent = urgent
        # Pieces the model produced (counted on the llm thread as they come), and how many it had
        # when ``stop`` was asked: the difference is what it produced after (at most the one in flight).
        self.produced = 0
        self.produced_at_stop: int | None = None
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._future: asyncio.Future[ChatResult] = loop.create_future()
        lane = executors.urgent

        def on_token(piece: str) -> None:
            self.produced += 1
            loop.call_soon_threadsafe(self._queue.put_nowait, piece)
            lane.cut_in(model)

        def settle(result: ChatResult | None, error: BaseException | None) -> None:
            executors.release(self)
            if self._future.done():
                return
            if error is not None:
                self._future.set_exception(error)
            else:
                self._future.set_result(result)  # type: ignore[arg-type]
                if on_result is not None and result is not None:
                    on_result(result)  # on the loop, once, however the awaiting side ended

        def work() -> None:
            result: ChatResult | None = None
            error: BaseException | None = None
            try:
                if background and self.cancel.cancelled:  # gave way before it started
                    raise RuntimeError("a background call gave way to a prompt input")
                result = model.chat(messages, params=params, stage=stage, json_schema=json_schema,
                                    on_token=on_token, cancel=self.cancel)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                error = exc
            finally:
                loop.call_soon_threadsafe(settle, result, error)
                loop.call_soon_threadsafe(self._queue.put_nowait, _DONE)

        call = _Call(work)
        if urgent:
            lane.push(call)
        loop.run_in_executor(executors.pool("llm"), call.run_if_unclaimed)

    def stop(self) -> None:
        if self.produced_at_stop is None:
            self.produced_at_stop = self.produced
        self.cancel.cancel()

    @property
    def produced_after_stop(self) -> int | None:
        """Pieces the model produced after ``stop`` was asked (None: never stopped)."""
        return None if self.produced_at_stop is None else self.produced - self.produced_at_stop

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        while True:
            item = await self._queue.get()
            if item is _DONE:
                break
            yield str(item)
        self.result = await self._future

    async def wait(self) -> ChatResult:
        """Drain the stream and return the final result."""
        async for _ in self:
            pass
        assert self.result is not None
        return self.result
