"""``pcm tools``: the MCP servers whose tools PCM may use (PCM as an MCP client).

    pcm tools list [--json]
    pcm tools add NAME [--cwd DIR] [--env K=V ...] [--timeout S] [--result-chars N] -- COMMAND [ARGS...]
    pcm tools add NAME --url URL [--bearer-env VAR] [--yes-off-machine]
    pcm tools import FILE [--yes-off-machine]
    pcm tools remove NAME
    pcm tools enable NAME | disable NAME
    pcm tools confirm once|each-call
    pcm eval tools [DIR]   (the plan's tool filter over a few hundred tools: ``app.eval.tools``)

The servers live in ``tool_servers.json`` in the data folder (``app.toolservers.config``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config import Settings
from app.core.errors import CoreError

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord

EPILOG = """\
A server is a command PCM starts and talks to over stdio, or a streamable HTTP URL. Its tools join
the registry the plan's tool filter chooses from each turn; a tool the server marks read-only runs
when chosen, any other asks you first (once per tool and session; `pcm tools confirm each-call` to
be asked at every call; `pcm ask --allow-tool NAME` to allow one beforehand). A URL that is not this
machine is refused unless you add --yes-off-machine: tool calls send your sessions' text there.

examples:
  pcm tools add files -- npx -y @modelcontextprotocol/server-filesystem ~/notes
  pcm tools add memory --env MEMORY_FILE_PATH=~/pcm-memory.jsonl -- npx -y @modelcontextprotocol/server-memory
  pcm tools add time -- uvx mcp-server-time
  pcm tools add lab --url http://127.0.0.1:8931/mcp
  pcm tools import ~/.config/Claude/claude_desktop_config.json
"""


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _data_dir(args: argparse.Namespace) -> Any:
    return Settings.load(args.data_dir).data_dir


def cmd_list(args: argparse.Namespace) -> int:
    """Start the enabled servers, wait until each is ready or failed, print their state and tools."""
    from app.toolservers.client import McpToolServers
    from app.toolservers.config import load_servers

    settings = load_servers(_data_dir(args))
    servers = McpToolServers(settings.servers).start()
    try:
        servers.wait_settled(args.wait)
        states, tools = servers.states(), servers.tools()
    finally:
        servers.close_now()
    rows = []
    for state in states:
        listed = [t for t in tools if t.server == state.name]
        rows.append({**state.model_dump(mode="json"), "enabled": state.error != "disabled",
                     "tools": [{"name": t.name, "title": t.title, "read_only": t.read_only,
                                "description": t.description} for t in listed]})
    if args.json:
        print(json.dumps({"servers": rows, "confirm_each_call": settings.confirm_each_call}, indent=2))
        return 0
    if not rows:
        print("no tool servers (add one: pcm tools add NAME -- COMMAND ARGS…)")
    for row in rows:
        line = f"{row['name']}\t{row['status']}\t{row['transport']}\t{row['where']}"
        print(line + (f"\n  {row['error']}" if row["error"] else ""))
        for tool in row["tools"]:
            mark = "reads only" if tool["read_only"] else "asks first"
            print(f"  {row['name']}.{tool['name']}\t{mark}\t{' '.join(tool['description'].split())[:90]}")
    print("tools that change things ask " + ("at every call" if settings.confirm_each_call
                                             else "once per tool and session"))
    return 0


def _env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CoreError(f"--env {pair!r}: expected NAME=VALUE")
        env[key] = value
    return env


def cmd_add(args: argparse.Namespace) -> int:
    from app.toolservers.config import add_server

    command = list(args.command)
    if args.url and command:
        raise CoreError("give a command after -- or --url, not both")
    if not args.url and not command:
        raise CoreError("give the server's command after -- (pcm tools add NAME -- COMMAND ARGS…) or --url URL")
    config: dict[str, Any] = {"name": args.name, "url": args.url or "", "bearer_env": args.bearer_env or "",
                              "command": command[0] if command else "", "args": command[1:], "env": _env(args.env),
                              "cwd": args.cwd or "", "timeout_s": args.timeout, "result_chars": args.result_chars}
    saved = add_server(_data_dir(args), config, allow_off_machine=args.yes_off_machine)
    where = ("OFF THE MACHINE: tool calls will send session text to " if saved.off_machine else "") + saved.where()
    print(f"added tool server {saved.name}: {where}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from app.toolservers.config import import_servers, read_client_config

    added = import_servers(_data_dir(args), read_client_config(args.file), allow_off_machine=args.yes_off_machine)
    for server in added:
        print(f"added tool server {server.name}: {server.where()}" + ("" if server.enabled else " (disabled)"))
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from app.toolservers.config import remove_server

    remove_server(_data_dir(args), args.name)
    print(f"removed tool server {args.name}")
    return 0


def cmd_enable(args: argparse.Namespace) -> int:
    from app.toolservers.config import set_enabled

    set_enabled(_data_dir(args), args.name, args.action == "enable")
    print(f"tool server {args.name} {'enabled' if args.action == 'enable' else 'disabled'}")
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    from app.toolservers.config import set_confirm_each_call

    set_confirm_each_call(_data_dir(args), args.when == "each-call")
    print("tools that change things ask " + ("at every call" if args.when == "each-call"
                                             else "once per tool and session"))
    return 0


def tool_lines(record: TurnRecord) -> list[str]:
    """The tools the plan offered (of how many), and each call: tool, status, why not run."""
    round_ = record.build.tools
    if round_ is None or not (round_.offered or round_.calls):
        return []
    lines = [f"tools: offered {len(round_.offered)} of {len(record.build.tool_specs)}: {', '.join(round_.offered)}"]
    for outcome in round_.calls:
        line = f"  called {outcome.call.tool}: {outcome.status}"
        lines.append(line + (f" — {outcome.error}" if outcome.error else ""))
    return lines


def cmd_eval_tools(args: argparse.Namespace) -> int:
    """``pcm eval tools [DIR]``: the plan's tool filter over a few hundred tools (``app.eval.tools``)."""
    from app import main as wiring
    from app.config import RESOURCES_DIR
    from app.eval.tools import format_tools_report, run_tools_eval

    folder = Path(args.dir) if args.dir else RESOURCES_DIR / "eval" / "tools"
    for name in ("registry.json", "requests.jsonl"):
        if not (folder / name).is_file():
            _say(f"pcm: error: {folder / name} not found")
            return 2
    embedder = wiring.load_embedder(Settings.load(args.data_dir))
    report = run_tools_eval(embedder, folder, out=Path(args.out) if args.out else None, progress=_say)
    print(format_tools_report(report))
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``pcm tools ...`` to the CLI's subcommands."""
    p = sub.add_parser("tools", help="MCP tool servers: list, add, import, remove, enable, disable, confirm",
                       description="The MCP servers whose tools PCM may use.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = acts.add_parser("list", help="start the servers, show their state and tools, stop them")
    q.add_argument("--json", action="store_true")
    q.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the servers to start (default 30)")
    q.set_defaults(func=cmd_list)
    q = acts.add_parser("add", help="add (or replace) a server: a command after --, or --url", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("name", help="a short name (letters, digits, - and _); its tools are named NAME.tool")
    q.add_argument("--url", help="a streamable HTTP endpoint instead of a command")
    q.add_argument("--bearer-env", help="NAME of the environment variable holding a bearer token (never stored)")
    q.add_argument("--yes-off-machine", action="store_true",
                   help="confirm that tool calls may send session text to a URL that is not this machine")
    q.add_argument("--env", action="append", default=[], metavar="K=V", help="environment of the server process")
    q.add_argument("--cwd", help="the server process's working folder (relative paths it is given resolve there)")
    q.add_argument("--timeout", type=float, default=30.0, help="seconds a call may take (default 30)")
    q.add_argument("--result-chars", type=int, default=20_000, help="characters of a result kept (default 20000)")
    q.add_argument("command", nargs="*", help="-- COMMAND [ARGS…] (everything after -- is the command line)")
    q.set_defaults(func=cmd_add)
    q = acts.add_parser("import", help='add the servers of another client\'s JSON ({"mcpServers": {...}})')
    q.add_argument("file")
    q.add_argument("--yes-off-machine", action="store_true")
    q.set_defaults(func=cmd_import)
    q = acts.add_parser("remove", help="remove a server")
    q.add_argument("name")
    q.set_defaults(func=cmd_remove)
    for action in ("enable", "disable"):
        q = acts.add_parser(action, help=f"{action} a server (kept in the file)")
        q.add_argument("name")
        q.set_defaults(func=cmd_enable)
    q = acts.add_parser("confirm", help="when a tool that changes things asks: once per tool and session, or each call")
    q.add_argument("when", choices=["once", "each-call"])
    q.set_defaults(func=cmd_confirm)


def cli_approver(allowed: Sequence[str] = ()) -> Any:
    """The CLI's ``ToolApprover``: the tools named with ``--allow-tool`` run; for the others a y/N
    prompt on a terminal, elsewhere a refusal with the line that says how to allow the tool."""
    import asyncio

    async def approve(request: Any) -> bool:
        if request.tool in allowed:
            return True
        if not sys.stdin.isatty():
            print(f"pcm: {request.tool} changes things and was not run; to allow it, run again with "
                  f"--allow-tool {request.tool}", file=sys.stderr, flush=True)
            return False
        args = json.dumps(request.arguments, ensure_ascii=False)[:300]
        prompt = f"\n{request.question()}\n  arguments: {args}\nAllow? [y/N] "
        answer = await asyncio.to_thread(lambda: input(prompt))
        return answer.strip().lower() in ("y", "yes")

    return approve
