"""The MCP server over streamable HTTP: bound to 127.0.0.1, every request carrying the bearer
token or refused with 401.

The token is ``$PCM_MCP_TOKEN`` when set, else the one kept in the data folder
(``mcp-token``, readable by its owner only), made on first use. ``pcm mcp --print-token``
shows it, for the client's configuration.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Any

TOKEN_FILE = "mcp-token"
TOKEN_ENV = "PCM_MCP_TOKEN"


def bearer_token(data_dir: Path) -> str:
    """The token clients must send (see the module doc); creates the file when missing."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    if given:
        return given
    path = Path(data_dir) / TOKEN_FILE
    if path.is_file():
        token = path.read_text(encoding="ascii").strip()
        if token:
            return token
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(token + "\n")
    return token


class BearerAuth:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self._expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": "missing or wrong bearer token (pcm mcp --print-token shows it)"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def serve(mcp: Any, token: str, port: int, ready: Any = None, *, embedded: bool = False,
                log_level: str = "warning") -> None:
    """Serve ``mcp`` (an ``MCPServer``) on 127.0.0.1:``port`` until cancelled; ``ready`` (an
    ``asyncio.Event``) is set once it listens. ``embedded`` (inside the desktop app): leave the
    process's signal handlers alone. uvicorn logs at ``log_level`` (its access log only at debug)."""
    import asyncio
    import contextlib

    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            if embedded:
                yield
            else:
                with super().capture_signals():
                    yield

    app = BearerAuth(mcp.streamable_http_app(host="127.0.0.1"), token)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level, lifespan="on",
                            access_log=log_level == "debug", log_config=None)  # the process's logging, not uvicorn's
    server = Server(config)
    task = asyncio.create_task(server.serve(), name="uvicorn")
    try:
        while not server.started and not task.done():
            await asyncio.sleep(0.05)
        if ready is not None:
            ready.set()
        await asyncio.shield(task)
    except asyncio.CancelledError:  # stop as uvicorn means to: close the listener, end the sessions
        server.should_exit = True
        await asyncio.wait([task], timeout=10)
        raise
