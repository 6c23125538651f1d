"""``McpToolServers``: the ``ToolServers`` port over the official MCP client (``mcp`` SDK).

The servers run off the engine's loop: this object owns one asyncio loop on its own thread
("pcm-tool-servers") and one connection task per enabled server. A connection starts the server
(a stdio command, its stderr appended to ``<log_dir>/<name>.log``) or connects to its streamable
HTTP URL (a bearer token from ``bearer_env``), lists its tools (every page), and then keeps it
honest: it lists them again when the server says they changed, every ``probe_s`` seconds, and as
soon as a call saw the connection break. A server that fails to start, crashes or stops answering
is marked failed with one line and started again after a backoff (1, 2, 5, 10, 30, 60 s).

``call_tool`` hands the call to that loop and awaits it from the caller's loop; it ends within the
call's ``timeout_s`` — a hung call is cancelled there — and every failure is a ``ToolServerError``
naming the server. States and tools are snapshots read under a lock; listeners hear every change
(from this thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from app.core.errors import ToolServerError
from app.core.ports import ServerCallResult, ServerState, ServerTool
from app.core.types import utc_now
from app.toolservers.config import ToolServerConfig, ToolServerSettings
from app.toolservers.convert import call_result, error_line, listed_tool

log = logging.getLogger(__name__)
BACKOFF_S: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
CLIENT = Implementation(name="pcm-canvas", version="0.1")


class _Connection:
    """One server's connection task and its current state."""

    def __init__(self, owner: McpToolServers, config: ToolServerConfig) -> None:
        self.owner, self.config = owner, config
        self.client: Client | None = None
        self.state = ServerState(name=config.name, transport=config.transport, where=config.where(),
                                 status="starting", since=utc_now(), timeout_s=config.timeout_s,
                                 result_chars=config.result_chars)
        self.tools: list[ServerTool] = []
        self.poke = asyncio.Event()  # list again now (tools changed, or a call saw the connection break)
        self.task: asyncio.Task[None] | None = None

    def set(self, **fields: Any) -> None:
        self.state = self.state.model_copy(update={"since": utc_now(), **fields})
        self.owner.changed()

    async def run(self) -> None:
        """Connect, serve, and reconnect after a failure, until cancelled."""
        attempt = 0
        while True:
            self.set(status="starting", error="")
            try:
                await self.serve()
                error = f"tool server {self.config.name}: the connection ended"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of a server is its state, never the app's
                error = error_line(self.config.name, exc)
            self.client, self.tools = None, []
            attempt = min(attempt + 1, len(BACKOFF_S))
            self.set(status="failed", error=error, tools=0, restarts=self.state.restarts + 1)
            await asyncio.sleep(BACKOFF_S[attempt - 1])

    async def serve(self) -> None:
        """One connection's life: start, list, then list again when poked or every ``probe_s``."""
        owner = self.owner
        with self._errlog() as errlog:
            async with contextlib.AsyncExitStack() as stack:
                transport = await self._transport(stack, errlog)
                client = Client(transport, client_info=CLIENT, message_handler=self._on_message, mode="auto")
                async with asyncio.timeout(owner.connect_timeout_s):
                    await stack.enter_async_context(client)
                    tools = await self._list(client)
                self.client, self.tools = client, tools
                self.set(status="ready", error="", tools=len(tools))
                while True:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(owner.probe_s):
                            await self.poke.wait()
                    self.poke.clear()
                    async with asyncio.timeout(owner.connect_timeout_s):
                        tools = await self._list(client)
                    if tools != self.tools:
                        self.tools = tools
                        self.set(tools=len(tools))

    @contextlib.contextmanager
    def _errlog(self) -> Any:
        log_dir = self.owner.log_dir
        if log_dir is None or self.config.url:
            with open(os.devnull, "w") as sink:  # noqa: PTH123 - a file with a descriptor for the child
                yield sink
            return
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / f"{self.config.name}.log", "a", encoding="utf-8") as log:  # noqa: PTH123
            yield log

    async def _transport(self, stack: contextlib.AsyncExitStack, errlog: TextIO) -> Any:
        config = self.config
        if not config.url:
            params = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env) or None,
                                           cwd=config.cwd or None)
            return stdio_client(params, errlog=errlog)
        import httpx2

        headers = {}
        if config.bearer_env:
            token = os.environ.get(config.bearer_env, "")
            if not token:
                raise ToolServerError(f"tool server {config.name}: ${config.bearer_env} is not set")
            headers["Authorization"] = f"Bearer {token}"
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=config.timeout_s))
        return streamable_http_client(config.url, http_client=http)

    async def _list(self, client: Client) -> list[ServerTool]:
        tools, cursor = [], None
        for _ in range(100):  # a server whose pages never end cannot hang the listing
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += [listed_tool(self.config.name, t) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/tools/list_changed":
            self.poke.set()

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> ServerCallResult:
        name, client = self.config.name, self.client
        if client is None:
            why = self.state.error or f"tool server {name} is {self.state.status}"
            raise ToolServerError(why if why.startswith("tool server") else f"tool server {name}: {why}")
        try:
            async with asyncio.timeout(timeout_s):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            self.poke.set()  # is it still there?
            raise ToolServerError(f"tool server {name}: {tool} gave no result within {timeout_s:g} s") from None
        except Exception as exc:  # noqa: BLE001 - the SDK's and the transport's errors alike
            self.poke.set()
            raise ToolServerError(error_line(name, exc)) from None
        return call_result(result)


class McpToolServers:
    """The configured MCP servers, kept running on their own thread (module doc)."""

    def __init__(self, servers: Sequence[ToolServerConfig], *, log_dir: Path | None = None,
                 probe_s: float = 20.0, connect_timeout_s: float = 30.0, each_call: bool = False,
                 source: Callable[[], ToolServerSettings] | None = None) -> None:
        self.configs = [s for s in servers if s.enabled]
        self.disabled = [s for s in servers if not s.enabled]
        self.log_dir, self.probe_s, self.connect_timeout_s = log_dir, probe_s, connect_timeout_s
        self.each_call = each_call  # the servers' setting: every call of a tool that changes things asks
        self.source = source  # where ``reload`` reads the settings again (the data folder's file)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: dict[str, _Connection] = {}
        self._settled = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> McpToolServers:
        """Start the thread and every enabled server (returns at once; they get ready in the background)."""
        if self._thread is not None:
            return self
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            for config in self.configs:
                self._connect(config)
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="pcm-tool-servers", daemon=True)
        self._thread.start()
        ready.wait()
        self.changed()
        return self

    def _connect(self, config: ToolServerConfig) -> None:
        """Start one server's connection task (on the servers' loop)."""
        assert self._loop is not None
        conn = self._conns[config.name] = _Connection(self, config)
        conn.task = self._loop.create_task(conn.run(), name=f"tool server {config.name}")

    async def reload(self) -> None:
        """Read the configuration again (``source``): start the servers added or enabled, stop
        those removed or disabled, restart those whose settings changed; the others keep running."""
        loop = self._loop
        if self.source is None or loop is None:
            return
        settings = await asyncio.to_thread(self.source)
        self.each_call = settings.confirm_each_call
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._reconfigure(settings.servers), loop))
        self.changed()

    async def _reconfigure(self, configs: Sequence[ToolServerConfig]) -> None:
        wanted = {c.name: c for c in configs if c.enabled}
        stale = [c for name, c in self._conns.items() if wanted.get(name) != c.config]
        for conn in stale:
            if conn.task is not None:
                conn.task.cancel()
        await asyncio.gather(*(c.task for c in stale if c.task is not None), return_exceptions=True)
        with self._lock:
            for conn in stale:
                self._conns.pop(conn.config.name, None)
            self.configs = [c for c in configs if c.enabled]
            self.disabled = [c for c in configs if not c.enabled]
        self._settled.clear()
        for config in self.configs:
            if config.name not in self._conns:
                self._connect(config)

    def wait_settled(self, timeout_s: float) -> bool:
        """Block until every enabled server is ready or failed (at most ``timeout_s``); True when so."""
        return self._settled.wait(timeout_s) if self.configs else True

    async def settled(self, timeout_s: float) -> bool:
        return await asyncio.to_thread(self.wait_settled, timeout_s)

    async def close(self) -> None:
        """Stop every server (their processes end) and the thread."""
        await asyncio.to_thread(self.close_now)

    def close_now(self) -> None:
        """``close`` for a caller without a loop (blocks for up to a few seconds per server)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return

        async def stop() -> None:
            tasks = [c.task for c in self._conns.values() if c.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=15)

    # ------------------------------------------------------------------ the port

    def changed(self) -> None:
        """A state or a tool list changed: tell the listeners (from this thread)."""
        states = self.states()
        if states and all(s.status in ("ready", "failed") for s in states if s.name in self._conns):
            self._settled.set()
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:  # noqa: BLE001 - a listener gone (its loop closed at shutdown) is not the servers' failure
                log.debug("a tool-server listener failed", exc_info=True)

    def confirm_each_call(self) -> bool:
        return self.each_call

    def states(self) -> list[ServerState]:
        with self._lock:
            live = [self._conns[c.name].state for c in self.configs if c.name in self._conns]
        off = [ServerState(name=c.name, transport=c.transport, where=c.where(), status="stopped", error="disabled",
                           timeout_s=c.timeout_s, result_chars=c.result_chars) for c in self.disabled]
        return live + off

    def tools(self) -> list[ServerTool]:
        with self._lock:
            return [t for c in self.configs if (conn := self._conns.get(c.name)) is not None and conn.client is not None
                    for t in conn.tools]

    def watch(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> ServerCallResult:
        loop, conn = self._loop, self._conns.get(server)
        if loop is None or conn is None:
            raise ToolServerError(f"no tool server {server!r} is running")
        future = asyncio.run_coroutine_threadsafe(conn.call(tool, arguments, timeout_s), loop)
        return await asyncio.wrap_future(future)  # cancelling this cancels the call on the servers' loop
