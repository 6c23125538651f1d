"""Named single-worker executors and the bridge from blocking model calls to the event loop.

DESIGN.md §3: one loop; blocking work goes to one single-worker executor per non-thread-safe
resource — ``llm`` (llama.cpp contexts are not thread-safe), ``embed`` and ``store`` (one SQLite
connection stays on one thread). Results come back with ``await loop.run_in_executor(...)``;
streamed tokens come back with ``loop.call_soon_threadsafe(queue.put_nowait, token)``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from app.core.ports import CancelToken, ChatMessage, ChatModel, ChatResult, GenerationParams

T = TypeVar("T")

EXECUTOR_NAMES = ("llm", "embed", "store", "index")


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

    def pool(self, name: str) -> ThreadPoolExecutor:
        return self._pools[name]

    async def run(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        call = functools.partial(fn, *args, **kwargs) if kwargs else functools.partial(fn, *args)
        return await loop.run_in_executor(self._pools[name], call)

    def shutdown(self, *, wait: bool = True) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=wait, cancel_futures=True)


_DONE = object()


class ChatStream:
    """One streamed chat call: iterate it for tokens, then read ``result``.

    The call runs on the ``llm`` executor; each token crosses to the loop with
    ``call_soon_threadsafe``. ``stop()`` cancels within one token.
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
    ) -> None:
        self.cancel = CancelToken()
        self.result: ChatResult | None = None
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def on_token(piece: str) -> None:
            loop.call_soon_threadsafe(self._queue.put_nowait, piece)

        def work() -> ChatResult:
            try:
                return model.chat(
                    messages,
                    params=params,
                    stage=stage,
                    json_schema=json_schema,
                    on_token=on_token,
                    cancel=self.cancel,
                )
            finally:
                loop.call_soon_threadsafe(self._queue.put_nowait, _DONE)

        self._future = loop.run_in_executor(executors.pool("llm"), work)

    def stop(self) -> None:
        self.cancel.cancel()

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
