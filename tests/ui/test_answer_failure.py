"""A failed answer is said in the window in one line (the card alone only turns 'failed')."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from app.config import Settings
from app.core.engine.facade import Engine, EngineConfig
from app.core.ports import ChatMessage, ChatResult, WordTokenCounter
from app.core.runtime.executors import Executors
from app.core.types import ModelUsage
from app.llm.fakes import HashEmbedder, ScriptedChatModel
from app.store.index import SearchIndex
from app.store.sqlite import SqliteStore
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until


class _FailingChat(ScriptedChatModel):
    def chat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResult:
        self.calls.append({"messages": list(messages), "stage": kw.get("stage", "answer")})
        usage = ModelUsage(stage=kw.get("stage", "answer"), provider="fake", model=self.name, status="error",
                           error="llama_decode returned -3\n(out of memory)")
        return ChatResult(text="", usage=usage, finish_reason="error")


def _build(settings: Settings, progress: Callable[[str], None]) -> Engine:
    progress("opening the store")
    ex = Executors()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = ex.pool("store").submit(SqliteStore, settings.db_path).result()
    embedder = HashEmbedder(dim=64)
    return Engine(store=store, index=SearchIndex(settings.index_dir, embedder), embedder=embedder,
                  chat=_FailingChat(), counter=WordTokenCounter(), executors=ex,
                  config=EngineConfig(default_budget=settings.default_budget, llm_intent="off"))


def test_a_failed_answer_shows_the_model_error_in_one_line(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, replace(fake_services(), build_engine=_build))
    qtbot.addWidget(window)
    window.show()
    drive(aloop, window.controller.load())
    window.composer.edit.setPlainText("What is on the agenda?")
    window.composer.send.click()
    message = drive(aloop, until(lambda: "answer failed" in window.statusBar().currentMessage()
                                 and window.statusBar().currentMessage(), 60, "the failure line"))
    assert message == "The answer failed: llama_decode returned -3 (out of memory)"
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
