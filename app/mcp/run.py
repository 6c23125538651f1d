"""``pcm mcp``: wire an engine on the data folder (no chat model: the tools compile contexts and
search, they do not generate), serve the MCP tools over stdio or HTTP, close cleanly.

Several processes may use one data folder at once (the desktop app and this server, say): the
store's cross-process locks serialize every write and the run lease keeps each process's
unfinished turns its own (``app/store/locks.py``, ``connection.RunLease``)."""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

from app.config import Settings
from app.core.errors import CoreError


def _say(line: str) -> None:
    print(f"pcm mcp: {line}", file=sys.stderr, flush=True)  # stdout is the protocol's (stdio)


def run(settings: Settings, *, http: bool = False, port: int = 8765, chat: bool = False) -> int:
    from app import main as wiring
    from app.llm.providers.settings import add_provider
    from app.mcp.server import build_server
    from app.mcp.service import ContextService

    engine = wiring.build_engine(settings, chat=chat, counter="words", progress=_say)

    async def main() -> None:
        try:
            for line in (await engine.start()).lines():
                _say(line)
            engine.set_watched_folders(settings.watched_folders)  # what attach_file (like read_file) may read
            service = ContextService(engine, data_dir=settings.data_dir, add_provider=add_provider)
            mcp = build_server(service)
            try:
                if http:
                    from app.mcp.http import bearer_token, serve

                    token = bearer_token(settings.data_dir)
                    _say(f"serving on http://127.0.0.1:{port}/mcp (bearer token: pcm mcp --print-token)")
                    await serve(mcp, token, port)
                else:
                    _say("serving on stdio")
                    await mcp.run_stdio_async()
            finally:
                await service.drain()
        finally:
            await engine.close()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    return 0


async def serve_engine(engine: Any, data_dir: Any, port: int) -> None:
    """Serve ``engine``'s sessions over HTTP from inside the desktop app until cancelled."""
    from app.llm.providers.settings import add_provider
    from app.mcp.http import bearer_token, serve
    from app.mcp.server import build_server
    from app.mcp.service import ContextService

    with socket.socket() as probe:  # a port in use: one line, never uvicorn's exit inside the app
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise CoreError(f"cannot serve MCP on 127.0.0.1:{port} ({exc.strerror or exc}); pick another port "
                            "in Settings") from None
    service = ContextService(engine, data_dir=data_dir, add_provider=add_provider)
    try:
        await serve(build_server(service), bearer_token(data_dir), port, embedded=True)
    except SystemExit:
        raise CoreError(f"the MCP server on 127.0.0.1:{port} stopped at start") from None
    finally:
        await service.drain()


def print_token(settings: Settings) -> int:
    from app.mcp.http import bearer_token

    print(bearer_token(settings.data_dir))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "mcp", help="serve PCM's context to other tools (Model Context Protocol)",
        description="Serve PCM's sessions to MCP clients: tools get_context_summary, get_relevant_snippets, "
                    "configure_llm_provider, record_event, add_profile_statement, "
                    "attach_file (files in the watched folders only), search_memory, search_facts, list_sessions, "
                    "get_status, start_task, get_task_status, control_task (with --chat); resources pcm://sessions, pcm://sessions/{id}, pcm://turns/{id}. Over stdio by "
                    "default (register the command `pcm mcp` in the client); --http serves streamable HTTP on "
                    "127.0.0.1 with a bearer token ($PCM_MCP_TOKEN, else kept in the data folder: --print-token).")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument("--print-token", action="store_true", help="print the HTTP bearer token and exit")
    p.add_argument("--chat", action="store_true", help="load the chat model, so that start_task runs tasks "
                                                        "(without it the server generates nothing)")
    p.set_defaults(func=_cmd)


def _cmd(args: Any) -> int:
    settings = Settings.load(args.data_dir)
    if args.print_token:
        return print_token(settings)
    return run(settings, http=args.http, port=args.port, chat=args.chat)
