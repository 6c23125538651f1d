"""The desktop composition root: ``python -m app`` (and the ``pcm-canvas`` script) start here.

It resolves settings, fills ``app.ui.services.Services`` with the adapters (store, models,
export files) and runs the window. Like ``app/main.py`` it holds construction only. It imports
``app.main`` (and with it the engine, the store, the sensors) only in ``build_engine``, which the
window's controller runs on a worker thread once the window is shown.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app import __version__, model_library
from app.config import Settings
from app.core.errors import CoreError
from app.logfile import start_log_file
from app.ui.services import ModelAccess, Progress, ProviderAccess, Services, ToolServerAccess


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas (as ``MALLOC_ARENA_MAX`` would) before threads start.

    The app's worker threads (llama.cpp, torch, LanceDB, sensors) each get their own arena by
    default; long runs of small allocations across them fragment memory so that resident size
    keeps climbing. Measured headless over 12,000 env events: +419 MB without the cap, +208 MB
    with it, flattening after ~6,000. Returns whether the cap was set (Linux/glibc only).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(-8, arenas))  # -8 = M_ARENA_MAX
    except (OSError, AttributeError):
        return False


def build_engine(settings: Settings, progress: Progress) -> Any:
    from app import main as wiring  # the engine's modules load here, on the loading thread, after the window shows

    return wiring.build_engine(settings, progress=progress)


def chat_models(settings: Settings) -> list[str]:
    from app.core.types import ModelRole
    from app.llm.models import list_models

    return [e.name for e in list_models(settings.models_dir, model_library.manifest(settings)) if e.role == ModelRole.CHAT]


def embed_models(settings: Settings) -> list[str]:
    from app.core.types import ModelRole

    return [e.name for e in model_library.manifest(settings) if e.role == ModelRole.EMBED]


def read_document(path: Path) -> Any:
    from app.store.docfile import read_document_file

    return read_document_file(path, shown=path.name)


def document_text(doc: dict[str, Any]) -> str:
    from app.store.docfile import document_text as text

    return text(doc)


def build_sensors(settings: Settings, sink: Any, history: list[Any]) -> Any:
    from app.sensors.sensorset import SensorSet

    return SensorSet.build(
        sink, folders=settings.watched_folders, ignore_patterns=settings.ignore_patterns,
        max_file_bytes=settings.max_file_bytes, feeds=settings.feeds, apis=settings.apis, history=history,
    )


def file_preparer(settings: Settings) -> Any:
    from app.sensors.files import make_preparer

    return make_preparer(settings.max_file_bytes)


def provider_listing(data_dir: Path) -> dict[str, Any]:
    """The providers of ``data_dir`` in the order they are tried, with what they cost so far."""
    from app.llm.providers import day_and_month
    from app.llm.providers.settings import load_providers
    from app.store.sqlite import read_spending

    providers = load_providers(data_dir)
    db = Settings(data_dir=data_dir).db_path
    day, month = day_and_month()
    today, this_month = read_spending(db, day), read_spending(db, month)
    rows = [{**p.model_dump(mode="json"), "off_machine": p.off_machine, "default": p.id == providers.default,
             "spent_today": today.get(p.id, 0.0), "spent_this_month": this_month.get(p.id, 0.0)}
            for p in providers.ordered()]
    return {"providers": rows, "daily_limit": providers.daily_limit, "monthly_limit": providers.monthly_limit}


def provider_access() -> ProviderAccess:
    """Settings → Providers over ``app.llm.providers`` (the settings file; the running registry)."""
    from app.llm.providers import ProviderRegistry, refresh_registry
    from app.llm.providers import settings as ps
    from app.llm.providers.check import check_provider

    def test(data_dir: Path, provider_id: str) -> str:
        config = ps.load_providers(data_dir).get(provider_id)
        return check_provider(config)[1] if config is not None else f"no provider {provider_id!r}"

    def apply(engine: Any, data_dir: Path) -> None:  # the engine's own data folder: reload() reads it
        chat = getattr(engine, "chat", None)
        if isinstance(chat, ProviderRegistry):
            refresh_registry(chat, data_dir)

    return ProviderAccess(
        listing=provider_listing,
        add=lambda data_dir, config, default, allow: ps.add_provider(data_dir, config, default,
                                                                     allow_off_machine=allow),
        remove=ps.remove_provider, set_default=ps.set_default,
        set_limits=lambda data_dir, daily, monthly, clear: ps.set_limits(data_dir, daily=daily, monthly=monthly,
                                                                          clear=clear),
        test=test, is_loopback=ps.is_loopback, apply=apply,
    )


def model_access() -> ModelAccess:
    """Settings → Models over ``app.model_library`` (files, servers, downloads)."""
    from app.llm.hub import hub_reachable

    return ModelAccess(
        listing=lambda settings, servers: model_library.listing(settings, servers=servers),
        download=lambda settings, name, progress, cancel: model_library.download(settings, name, on_progress=progress,
                                                                                  cancel=cancel),
        use_server=model_library.use_server, reachable=hub_reachable, note=model_library.note,
        apply=provider_access().apply,
    )


def tool_server_access() -> ToolServerAccess:
    """Settings → Tools over ``app.toolservers.config`` (the data folder's ``tool_servers.json``)."""
    from app.core.ports import is_loopback
    from app.toolservers import config as ts

    def listing(data_dir: Path) -> dict[str, Any]:
        settings = ts.load_servers(data_dir)
        return {"servers": [{**s.model_dump(mode="json"), "where": s.where(), "transport": s.transport}
                            for s in settings.servers], "confirm_each_call": settings.confirm_each_call}

    return ToolServerAccess(
        listing=listing,
        add=lambda data_dir, config, allow: ts.add_server(data_dir, config, allow_off_machine=allow),
        remove=ts.remove_server, set_enabled=ts.set_enabled, set_confirm_each_call=ts.set_confirm_each_call,
        import_file=lambda data_dir, path, allow: ts.import_servers(data_dir, ts.read_client_config(path),
                                                                    allow_off_machine=allow),
        is_loopback=is_loopback,
    )


def serve_mcp(engine: Any, data_dir: Path, port: int) -> Any:
    from app.mcp.run import serve_engine

    return serve_engine(engine, data_dir, port)


def services() -> Services:
    return Services(
        providers=provider_access(),
        models=model_access(),
        tool_servers=tool_server_access(),
        serve_mcp=serve_mcp,
        build_engine=build_engine,
        verify_chat_model=model_library.verify_chat_model,
        chat_models=chat_models,
        embed_models=embed_models,
        read_document=read_document,
        document_text=document_text,
        build_sensors=build_sensors,
        file_preparer=file_preparer,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pcm-canvas",
        description="PCM Canvas: the desktop canvas for long, branching work with a local LLM "
                    "(also `python -m app`). One window per data folder: starting it again raises that window.",
    )
    parser.add_argument("--version", action="version", version=f"pcm-canvas {__version__}")
    parser.add_argument("--data-dir", help="data folder (default: $PCM_DATA_DIR, else the user data folder)")
    parser.add_argument("--session", help="open this session: an id, its first characters, or 'last' (default: the "
                                          "one used last, or a new one)")
    parser.add_argument("--model", help="chat model for this run: a manifest name, a file in models/ or a path")
    parser.add_argument("--self-test", metavar="TEXT", nargs="?", const="In one sentence: what is a branch?",
                        help="open the window, answer TEXT on the configured models, print one line, quit "
                             "(exit status 0 when an answer was recorded)")
    parser.add_argument("file", nargs="?", metavar="FILE",
                        help="a session exported as JSON: import it as a new session and open it")
    return parser


def _session(settings: Settings, typed: str) -> str:
    """``--session`` as ``pcm`` takes it: a whole id, its first characters, or 'last' (read from
    the store alone, before any model loads); ``CoreError`` when it names no session or several."""
    from app import main as wiring  # here: only a start with --session reads the store before the window
    from app.core.engine.ids import resolve_id

    store = wiring.open_store(settings)
    try:
        return resolve_id(store, "session", typed)
    finally:
        store.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    limit_malloc_arenas()
    log_file = start_log_file()
    try:
        settings = Settings.load(args.data_dir)
        session_id = _session(settings, args.session) if args.session else None
    except CoreError as err:  # a broken settings file, an unknown session: one line, before any window
        logging.getLogger(__name__).error("%s", err, extra={"console": False})  # printed below, once
        print(f"pcm-canvas: error: {err}", file=sys.stderr)
        return 2
    logging.getLogger(__name__).info("PCM Canvas %s starting on %s (log: %s)", __version__, settings.data_dir,
                                     log_file, extra={"console": False})
    if args.model:
        settings = settings.model_copy(update={"chat_model": args.model})
    from app.ui.app import run_app

    return run_app(settings, services(), session_id=session_id, self_test=args.self_test,
                   open_file=Path(args.file).expanduser().resolve() if args.file else None)


if __name__ == "__main__":
    sys.exit(main())
