"""``pcm mcp``: serve the MCP tools over stdio or HTTP at once, wire an engine on the data folder
in the background (no chat model unless ``--chat``, which start_task needs: the tools compile contexts and search, they do not generate;
the tools wait for it), close cleanly. Logging goes to stderr, quiet by default (``--log-level``).

Several processes may use one data folder at once (the desktop app and this server, say): the
store's cross-process locks serialize every write and the run lease keeps each process's
unfinished turns its own (``app/store/locks.py``, ``connection.RunLease``)."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from typing import Any

from app.config import Settings
from app.core.errors import CoreError


def _say(line: str) -> None:
    print(f"pcm mcp: {line}", file=sys.stderr, flush=True)  # stdout is the protocol's (stdio)


LOG_LEVELS = ("debug", "info", "warning", "error")


class ClientMistakes(logging.Filter):
    """Below ``debug``, the SDK's records lose their tracebacks: a client's malformed request or
    bad argument is one line (its traceback says nothing about this server). A request whose
    client went away before its answer (a closed stream or connection, which the SDK and the
    HTTP server log as errors) is one line at INFO: nothing went wrong here. A tool of ours that
    crashed keeps its traceback (the SDK logs it from ``mcp.server.mcpserver``: a bug here), as
    does any other failure of the HTTP server. ``threshold``: the level shown (the handler's
    filter decides after a record's level was changed)."""

    def __init__(self, threshold: int = logging.NOTSET) -> None:
        super().__init__()
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info:
            return record.levelno >= self.threshold
        sdk = record.name.startswith("mcp.") and not record.name.startswith("mcp.server.mcpserver")
        if (sdk or record.name == "uvicorn.error") and _client_went_away(record.exc_info[1]):
            why = "the client went away before its answer"
            record.levelno, record.levelname = logging.INFO, "INFO"
        elif sdk:
            kind = record.exc_info[0].__name__ if record.exc_info[0] else "error"
            why = f"{kind}: {record.exc_info[1]}"
        else:
            return record.levelno >= self.threshold
        record.msg = f"{record.getMessage().strip()} ({why}; --log-level debug shows the traceback)"
        record.args, record.exc_info, record.exc_text = None, None, None
        return record.levelno >= self.threshold


def _client_went_away(exc: BaseException | None) -> bool:
    """Whether ``exc``, an exception it was raised from or during, or one of a group's, is a
    closed or broken stream or connection: the client left while its request was answered."""
    import anyio

    gone = (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError)
    for _ in range(8):  # the chain is short; never loop on a cycle
        if exc is None:
            return False
        if isinstance(exc, gone):
            return True
        if isinstance(exc, BaseExceptionGroup) and any(_client_went_away(e) for e in exc.exceptions):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def configure_logging(level: str) -> None:
    """Log to stderr (stdout is the protocol's, over stdio) at ``level``: warnings and errors by
    default, one line each; ``debug`` keeps every traceback."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pcm mcp: %(levelname)s %(name)s: %(message)s"))
    if level != "debug":
        handler.addFilter(ClientMistakes(logging.getLevelName(level.upper())))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def run(settings: Settings, *, http: bool = False, port: int = 8765, log_level: str = "warning",
        chat: bool = False) -> int:
    """Serve at once; load the engine in the background (``ready.ServiceGate``: the tools wait)."""
    from app.mcp.ready import ServiceGate
    from app.mcp.server import build_server

    configure_logging(log_level)
    gate = ServiceGate()
    mcp = build_server(gate, log_level=log_level.upper())

    async def main() -> None:
        loading = asyncio.create_task(_load(settings, gate, chat), name="pcm mcp engine")
        try:
            if http:
                from app.mcp.http import bearer_token, serve

                token = bearer_token(settings.data_dir)
                _say(f"serving on http://127.0.0.1:{port}/mcp (bearer token: pcm mcp --print-token)")
                await serve(mcp, token, port, log_level=log_level)
            else:
                _say("serving on stdio")
                await mcp.run_stdio_async()
        finally:
            await _unload(loading)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    return 0


async def _load(settings: Settings, gate: Any, chat: bool = False) -> Any:
    """Wire and start the engine off the loop, then open the gate; returns the service (None
    when the engine could not load: the gate says why to every call). The load begins at once,
    beside the client's ``initialize``: alternating starts on this machine answered the first
    tool call 1.2–2.5 s sooner than when the load waited for the greeting, and ``initialize`` no
    later (2.1–3.0 s against 2.3–3.2 s at load 4–5)."""
    from app import main as wiring
    from app.llm.providers.settings import add_agent_provider
    from app.mcp.service import ContextService

    try:
        engine = await asyncio.to_thread(wiring.build_engine, settings, chat=chat, counter="words", progress=_say)
    except CoreError as exc:
        _say(f"error: {exc}")
        gate.fail(str(exc))
        return None
    try:
        for line in (await engine.start()).lines():
            _say(line)
        engine.set_watched_folders(settings.watched_folders)  # what attach_file (like read_file) may read
    except BaseException:
        await engine.close()
        raise
    service = ContextService(engine, data_dir=settings.data_dir, add_provider=add_agent_provider)
    gate.set(service)
    _say("ready")
    return service


async def _unload(loading: asyncio.Task[Any]) -> None:
    """After serving: wait for a load still under way (an engine half-built cannot be dropped),
    store the queued events, close the engine."""
    try:
        service = await loading
    except Exception:  # noqa: BLE001 - the load's own failure: nothing to close
        logging.getLogger(__name__).exception("the engine did not load")
        return
    if service is not None:
        try:
            await service.drain()
        finally:
            await service.engine.close()


async def serve_engine(engine: Any, data_dir: Any, port: int) -> None:
    """Serve ``engine``'s sessions over HTTP from inside the desktop app until cancelled."""
    from app.llm.providers.settings import add_agent_provider
    from app.mcp.http import bearer_token, serve
    from app.mcp.server import build_server
    from app.mcp.service import ContextService

    with socket.socket() as probe:  # a port in use: one line, never uvicorn's exit inside the app
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise CoreError(f"cannot serve MCP on 127.0.0.1:{port} ({exc.strerror or exc}); pick another port "
                            "in Settings") from None
    service = ContextService(engine, data_dir=data_dir, add_provider=add_agent_provider)
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
    p.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                   help="what goes to stderr (default warning: quiet, one line per problem; debug: everything, "
                        "with tracebacks)")
    p.add_argument("--chat", action="store_true", help="load the chat model, so that start_task runs tasks "
                                                        "(without it the server generates nothing)")
    p.set_defaults(func=_cmd)


def _cmd(args: Any) -> int:
    settings = Settings.load(args.data_dir)
    if args.print_token:
        return print_token(settings)
    return run(settings, http=args.http, port=args.port, log_level=args.log_level, chat=args.chat)
