"""The service the MCP tools use, once the engine behind it has loaded.

``pcm mcp`` answers ``initialize`` (and lists its tools and resources) at once while the engine
loads in the background (the embedder and the index take seconds; a client's handshake timeout
may be shorter); every tool call and resource read waits here until the engine is ready, or
fails in one line if it could not load.
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver.exceptions import ToolError

from app.mcp.service import ContextService


class ServiceGate:
    """Holds the ``ContextService`` once there is one; ``get`` waits for it."""

    def __init__(self, service: ContextService | None = None) -> None:
        self._service = service
        self._failure: str | None = None
        self._ready = asyncio.Event()
        if service is not None:
            self._ready.set()

    @property
    def ready(self) -> bool:
        return self._service is not None

    def set(self, service: ContextService) -> None:
        """The engine has loaded: every waiting call goes on with ``service``."""
        self._service = service
        self._ready.set()

    def fail(self, reason: str) -> None:
        """The engine could not load: every call, waiting or later, fails with ``reason``."""
        self._failure = reason
        self._ready.set()

    async def get(self) -> ContextService:
        """The service, once the engine is ready; ``ToolError`` when it failed to load."""
        await self._ready.wait()
        if self._service is None:
            raise ToolError(f"PCM could not start: {self._failure or 'the engine did not load'}")
        return self._service
