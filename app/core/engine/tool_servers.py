"""The tool servers' tools in the engine's registry, kept in step with the servers.

``ServerToolService`` reads the ``ToolServers`` port (MCP servers, ``app.toolservers``): at start
and whenever the port says a server's state or tools changed (its listener is called from the
adapter's thread and hops onto the engine's loop), ``sync`` registers each listed tool as
``server.tool`` (``app.core.tools.server``), replaces a tool whose listing changed, unregisters
the tools of a server that is gone or down, and has the ``ToolService`` embed the descriptions
of the new ones — once per listing, never per turn. A server that is down costs its tools, not
the turn: the filter never offers what is not registered, and a call to a server that died
between listing and call is a one-line failed outcome.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.core.engine.context import EngineContext
from app.core.engine.tools import ToolService
from app.core.ports import ServerState, ServerTool, ToolServers
from app.core.runtime.background import spawn
from app.core.tools.server import server_tool


@dataclass(frozen=True)
class ServersSynced:
    """What a sync changed: tools added, replaced and removed (``server.tool`` names)."""

    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced or self.removed)


class ServerToolService:
    """Registers the tool servers' tools with the engine's tools (module doc)."""

    def __init__(self, ctx: EngineContext, tools: ToolService, servers: ToolServers | None) -> None:
        self.ctx, self.tools, self.servers = ctx, tools, servers
        self._listed: dict[str, tuple[ServerTool, float, int]] = {}  # name → listing and the call limits
        self._lock = asyncio.Lock()
        self._pending = False

    async def start(self) -> ServersSynced:
        """Listen to the servers and register the tools of those ready now (the rest join when
        they are). Without servers, only the built-in tools' descriptions are embedded."""
        if self.servers is None:
            await self.tools.embed_tools()
            return ServersSynced()
        loop = asyncio.get_running_loop()

        def changed() -> None:  # from the adapter's thread
            loop.call_soon_threadsafe(self._changed)

        self.servers.watch(changed)
        return await self.sync()

    def states(self) -> list[ServerState]:
        """Every configured server's state (none without servers)."""
        return self.servers.states() if self.servers is not None else []

    def _changed(self) -> None:
        """A server's state or tools changed: sync soon (changes arriving meanwhile join it)."""
        if not self._pending:
            self._pending = True
            spawn(self.sync(), name="tool servers changed")

    async def sync(self, wait_s: float = 0.0) -> ServersSynced:
        """Bring the registry in step with the servers' current tools (after waiting up to
        ``wait_s`` for those still starting); return what changed."""
        if wait_s > 0 and self.servers is not None:
            await self.servers.settled(wait_s)
        async with self._lock:
            self._pending = False
            servers = self.servers
            if servers is None:
                return ServersSynced()
            self.tools.gate.per_call = servers.confirm_each_call()
            states = {s.name: s for s in servers.states() if s.status == "ready"}
            wanted = {f"{t.server}.{t.name}": (t, states[t.server]) for t in servers.tools() if t.server in states}
            registry = self.tools.registry
            removed = tuple(n for n in self._listed if n not in wanted)
            for name in removed:
                registry.unregister(name)
                del self._listed[name]
            added: list[str] = []
            replaced: list[str] = []
            for name, (listed, state) in wanted.items():
                key = (listed, state.timeout_s, state.result_chars)
                before = self._listed.get(name)
                if before == key:
                    continue
                (replaced if before is not None else added).append(name)
                registry.register(server_tool(listed, servers.call_tool, state), replace=True)
                self.tools.gate.hints[name] = (listed.destructive, listed.open_world)
                if before is not None and before[0].description != listed.description:
                    self.tools.forget_vector(name)  # embedded again below
                self._listed[name] = key
            await self.tools.embed_tools()
            return ServersSynced(tuple(added), tuple(replaced), removed)

    async def reload(self) -> None:
        """Have the port read the servers' settings again (the registry follows on ``sync``)."""
        if self.servers is not None:
            await self.servers.reload()

    async def close(self) -> None:
        """Stop the servers (their processes end; a call in flight fails with its line)."""
        if self.servers is not None:
            await self.servers.close()
