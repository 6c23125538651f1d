"""Composition root: the one module that wires adapters (store, index, models) for the engine.

Everything here is construction; no behaviour. Loading models is slow (seconds): callers that have
an event loop run these constructors on the matching executor (``llm`` / ``embed`` / ``store``).
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any

from app.config import Settings
from app.core.ports import ChatModel, Embedder
from app.llm.models import resolve_chat_model, resolve_embed_model
from app.model_library import manifest
from app.sensors.attach import read_attachment
from app.sensors.confined import ConfinedFolders
from app.store.exchange import StoreExchange
from app.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from app.core.engine.facade import Engine
    from app.core.runtime.executors import Executors
    from app.store.index import SearchIndex  # LanceDB: imported only where an index is opened
    from app.toolservers.client import McpToolServers


def open_store(settings: Settings) -> SqliteStore:
    """The SQLite system of record in the data folder (created and migrated on first open)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return SqliteStore(settings.db_path)


def load_chat_model(settings: Settings, *, prompt_cache: bool = True) -> ChatModel:
    """The configured GGUF chat model, validated before llama.cpp sees it.

    A file that is not in the manifest (dropped into models/ or picked by path) is also probed in
    a child process first, because llama.cpp aborts the whole process on some broken files.
    ``prompt_cache=False`` makes each call depend only on its inputs (replay, evaluation).
    """
    from app.llm.llama import LlamaChatModel

    entries = manifest(settings)
    path = resolve_chat_model(settings.chat_model, settings.models_dir, entries)
    known = next((e for e in entries if e.target(settings.models_dir) == path), None)
    return LlamaChatModel(
        path,
        context_size=settings.context_size,
        n_threads=settings.n_threads,
        name=known.name if known else None,
        probe=known is None,
        prompt_cache=prompt_cache,
    )


def load_embedder(settings: Settings) -> Embedder:
    """The configured sentence-transformers embedder, loaded from a local folder only."""
    from app.llm.embedder import SentenceEmbedder

    path = resolve_embed_model(settings.embed_model, settings.models_dir, manifest(settings))
    return SentenceEmbedder(path)


def chat_providers(settings: Settings, local: ChatModel, store: SqliteStore, executors: "Executors") -> ChatModel:
    """The provider registry over the data folder's ``providers.json`` (only ``local`` when there
    is none), its spending limits starting from what the store recorded today and this month."""
    from app.llm.providers import build_registry, day_and_month

    day, month = day_and_month()
    spent_today = executors.pool("store").submit(store.spending_since, day).result()
    spent_month = executors.pool("store").submit(store.spending_since, month).result()
    return build_registry(settings.data_dir, local, spent_today=spent_today, spent_this_month=spent_month)


def open_tool_servers(settings: Settings) -> McpToolServers:
    """The data folder's tool servers (``tool_servers.json``), started on their own thread (they
    get ready in the background); ``reload`` reads the file again."""
    from app.toolservers.client import McpToolServers
    from app.toolservers.config import load_servers

    configured = load_servers(settings.data_dir)
    servers = McpToolServers(configured.servers, log_dir=settings.data_dir / "logs" / "tool-servers",
                             each_call=configured.confirm_each_call, source=lambda: load_servers(settings.data_dir))
    return servers.start()


def open_index(settings: Settings, embedder: Embedder) -> SearchIndex:
    """The LanceDB search index (rebuildable from SQLite at any time)."""
    from app.store.index import SearchIndex

    return SearchIndex(settings.index_dir, embedder)


#: Net allocations between two collections of the youngest generation (``build_engine``).
YOUNG_COLLECTION = 20_000


def build_engine(
    settings: Settings,
    *,
    chat: bool = True,
    counter: str = "model",
    prompt_cache: bool = True,
    progress: Callable[[str], None] | None = None,
    index: bool = True,
) -> "Engine":
    """Wire the engine for ``settings``: store, embedder + index, chat model, token counter.

    Blocking (loads models for seconds): call before the loop starts, or on an executor.
    ``counter`` is "model" (the chat model's tokenizer) or "words" (ceil(1.3 × words), the
    evaluation yardstick). ``chat=False`` skips loading the chat model (no generation) and the
    tool servers (nothing answers, so no tool runs; replay reads recorded results).
    ``index=False`` (with ``chat=False`` and the words counter) wires the store alone: no model
    loads, nothing is searched or indexed — what the next engine with an index catches up on
    (``pcm memory add``). ``progress`` hears a short line before each slow step (the desktop shows it).
    """
    from app.core.engine.context import EngineConfig
    from app.core.engine.facade import Engine
    from app.core.ports import ModelTokenCounter, WordTokenCounter
    from app.core.runtime.executors import Executors

    say = progress or (lambda _line: None)
    # The collector's youngest generation every 20,000 net allocations instead of Python's 700: a
    # build allocates tens of thousands of short-lived objects (recall's candidates and grades),
    # so at 700 it ran ~6 young collections a build (~2.5 ms, pauses up to 12 ms at 10,000
    # turns); the loaded sessions are frozen out of its sight (``settle_heap``), so a young
    # collection only walks what was allocated since the last. (In the desktop app the UI thread
    # collects from a timer instead, on the thresholds in force when it started: ``app.ui.gc_guard``.)
    gc.set_threshold(YOUNG_COLLECTION, *gc.get_threshold()[1:])
    executors = Executors()
    if not index and not chat and counter == "words":
        store = executors.pool("store").submit(open_store, settings).result()
        return Engine(store=store, index=None, embedder=None, chat=None, counter=WordTokenCounter(),
                      executors=executors, config=EngineConfig(default_budget=settings.default_budget,
                                                               summary_model="off"),
                      folder_files=ConfinedFolders, file_reader=read_attachment, exchange=StoreExchange(store))
    want_model = chat or counter == "model"
    say(f"loading the embedder {settings.embed_model}"
        + (f" and the chat model {settings.chat_model}" if want_model else ""))
    # In parallel, each on the thread that will use it: the store's connection belongs to the
    # thread that opens it; torch's import (most of the embedder's load) and llama.cpp's load
    # overlap instead of adding up.
    store_f = executors.pool("store").submit(open_store, settings)
    embed_f = executors.pool("embed").submit(load_embedder, settings)
    model_f = executors.pool("llm").submit(load_chat_model, settings, prompt_cache=prompt_cache) if want_model else None
    lance_f = executors.pool("index").submit(importlib.import_module, "app.store.index")  # LanceDB's import, beside them
    try:
        store = store_f.result()
        embedder = embed_f.result()
        say("opening the search index")
        lance_f.result()
        search_index = open_index(settings, embedder)
        model = model_f.result() if model_f is not None else None
        answering = chat_providers(settings, model, store, executors) if chat and model is not None else None
    except BaseException:
        loads: tuple[Future[Any] | None, ...] = (store_f, embed_f, model_f, lance_f)
        started = [f for f in loads if f is not None and not f.cancel()]
        wait(started)  # every load that began ends before the pools go
        if store_f in started and store_f.exception() is None:  # closed on its own thread
            executors.pool("store").submit(store_f.result().close).result()
        executors.shutdown(wait=True)
        raise
    token_counter = ModelTokenCounter(model) if counter == "model" and model is not None else WordTokenCounter()
    # Without a chat model nothing limits the context but the budget (evaluation, benchmarks).
    context_size = settings.context_size if chat else 1 << 20
    config = EngineConfig(default_budget=settings.default_budget, context_size=context_size,
                          max_streams=settings.max_concurrent_streams, memory_model=settings.memory_model,
                          summary_model="auto" if chat else "off", proactive=settings.proactive)
    return Engine(
        store=store, index=search_index, embedder=embedder, chat=answering,
        counter=token_counter, executors=executors, config=config, folder_files=ConfinedFolders,
        file_reader=read_attachment, exchange=StoreExchange(store),
        tool_servers=open_tool_servers(settings) if chat else None,
    )
