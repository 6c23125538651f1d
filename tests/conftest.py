"""Suite-wide fixtures: tests never touch the real user folders, and run offline and headless;
and the one way tests build an engine (``make_engine``, over ``engine_in``)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from app.core.engine.context import EngineConfig
    from app.core.engine.facade import Engine
    from app.core.ports import ChatModel, Embedder, TokenCounter
    from app.core.runtime.executors import Executors

T = TypeVar("T")

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the data folder and the XDG folders at tmp_path for every test."""
    data = tmp_path / "pcm-data"
    monkeypatch.setenv("PCM_DATA_DIR", str(data))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))  # the desktop's log file
    return data


# --------------------------------------------------------------------------- the engine


def engine_in(
    data_dir: Path,
    replies: Sequence[str] = ("ok",),
    *,
    chat: ChatModel | None = None,
    delay: float = 0.0,
    embedder: Embedder | None = None,
    counter: TokenCounter | None = None,
    config: EngineConfig | None = None,
    budget: int = 400,
    llm_intent: str = "off",
    max_streams: int | None = None,
    task_steps: str | None = None,
    executors: Executors | None = None,
    tool_servers: Any = None,
) -> Engine:
    """An engine over real SQLite + LanceDB in ``data_dir``, laid out as the app lays out its data
    folder (``Settings.db_path``, ``Settings.index_dir``), with the scripted fakes by default.

    The chat model is ``chat``, else a ``ScriptedChatModel`` that streams ``replies`` in turn
    (``delay`` seconds a token); the embedder is ``embedder`` (e.g. the real ``SentenceEmbedder``),
    else ``HashEmbedder(dim=64)``; the counter counts words unless told otherwise. ``config``
    replaces the whole ``EngineConfig``; without it one is made from ``budget``, ``llm_intent``,
    ``max_streams`` and ``task_steps`` (how a new task gets its steps: "model", the default,
    "rules" or "off", one stream). ``read_file`` reads through the app's confined opener (``ConfinedFolders``);
    ``attach_file`` through the app's ``read_attachment``; export and import through ``StoreExchange``;
    ``tool_servers`` is the ``ToolServers`` port (e.g. ``app.toolservers.client.McpToolServers`` over
    real servers), none by default.
    The store is opened on the engine's own "store" thread, as the app does.

    A plain function for the places a fixture cannot reach (the desktop's ``build_engine`` hook,
    module-scoped fixtures); a test takes the ``make_engine`` fixture instead.
    """
    # Imported here, not at the top: the pure core tests load this conftest too.
    from app.config import Settings
    from app.core.engine.context import EngineConfig
    from app.core.engine.facade import Engine
    from app.core.ports import WordTokenCounter
    from app.core.runtime.executors import Executors
    from app.llm.fakes import HashEmbedder, ScriptedChatModel
    from app.sensors.attach import read_attachment
    from app.sensors.confined import ConfinedFolders
    from app.store.exchange import StoreExchange
    from app.store.index import SearchIndex
    from app.store.sqlite import SqliteStore

    layout = Settings(data_dir=data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    ex = executors if executors is not None else Executors()
    store = ex.pool("store").submit(SqliteStore, layout.db_path).result()
    embedder = embedder if embedder is not None else HashEmbedder(dim=64)
    if config is None:
        config = EngineConfig(default_budget=budget, llm_intent=llm_intent)
        if max_streams is not None:
            config = replace(config, max_streams=max_streams)
        if task_steps is not None:
            config = replace(config, task_steps=task_steps)
    return Engine(
        store=store,
        index=SearchIndex(layout.index_dir, embedder),
        embedder=embedder,
        chat=chat if chat is not None else ScriptedChatModel(replies, token_delay_s=delay),
        counter=counter if counter is not None else WordTokenCounter(),
        executors=ex,
        config=config,
        folder_files=ConfinedFolders,
        file_reader=read_attachment,
        exchange=StoreExchange(store),
        tool_servers=tool_servers,
    )


async def stored(engine: Engine, fn: Callable[..., T], *args: Any) -> T:
    """``fn(store, *args)`` on the engine's store thread: a test reading or writing the system of
    record directly (front ends cannot: the engine's facade hands out no store)."""
    ctx = engine._ctx  # a test looks behind the facade
    return await ctx.on_store(fn, ctx.store, *args)


class EngineFactory:
    """What the ``make_engine`` fixture gives a test: ``make_engine(replies, **options)`` builds an
    engine (options as ``engine_in``; the data folder is the test's ``tmp_path`` unless
    ``data_dir=`` says otherwise), as many as the test needs (a reopened engine shares the folder).
    ``make_engine.run(body, ...)`` also starts it and closes it around ``await body(engine)``."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self._executors: list[Executors] = []

    def __call__(self, replies: Sequence[str] = ("ok",), *, data_dir: Path | None = None, **options: Any) -> Engine:
        from app.core.runtime.executors import Executors

        ex = Executors()
        self._executors.append(ex)
        return engine_in(data_dir if data_dir is not None else self.tmp_path, replies, executors=ex, **options)

    def run(self, body: Callable[[Engine], Awaitable[T]], replies: Sequence[str] = ("ok",), **options: Any) -> T:
        """Build an engine, start it, return ``await body(engine)`` and close the engine (also when
        ``body`` fails), on a fresh event loop: one app run over the folder."""
        engine = self(replies, **options)

        async def main() -> T:
            await engine.start()
            try:
                return await body(engine)
            finally:
                await engine.close()

        return asyncio.run(main())

    def shutdown(self) -> None:
        """Stop the worker threads of every engine built, as the last step of ``Engine.close``
        does: a no-op for the engines the test closed, the end of those it left running (a
        simulated crash) so that their threads do not outlive the test."""
        for ex in self._executors:
            ex.shutdown(wait=True)


@pytest.fixture
def make_engine(tmp_path: Path) -> Iterator[EngineFactory]:
    """Builds engines over real SQLite + LanceDB in ``tmp_path`` (see ``EngineFactory``)."""
    factory = EngineFactory(tmp_path)
    yield factory
    factory.shutdown()
