"""`pcm ask` never fails silently, and a paste longer than the model's context is answered.

The fast test wires the scripted model into the CLI; the ``model`` test runs `pcm ask` and
`pcm show` as subprocesses on the real SmolLM2 (context 2048).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.config import Settings
from app.core.engine.facade import Engine, EngineConfig
from app.core.ports import ChatMessage, ChatResult, WordTokenCounter
from app.core.runtime.executors import Executors
from app.core.types import ModelUsage
from app.llm.fakes import HashEmbedder, ScriptedChatModel
from app.store.index import SearchIndex
from app.store.sqlite import SqliteStore
from tests.texts import long_paste

ROOT = Path(__file__).resolve().parent.parent


class FailingChatModel(ScriptedChatModel):
    """Answers nothing: every call ends as the real adapter ends a failed generation."""

    def chat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResult:
        self.calls.append({"messages": list(messages), "stage": kw.get("stage", "answer")})
        usage = ModelUsage(stage=kw.get("stage", "answer"), provider="fake", model=self.name, status="error",
                           error="llama_decode returned -3\n(out of memory)")
        return ChatResult(text="", usage=usage, finish_reason="error")


def test_a_failed_answer_is_one_line_and_a_non_zero_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def build_engine(settings: Settings, **_kw: Any) -> Engine:
        ex = Executors()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        store = ex.pool("store").submit(SqliteStore, settings.db_path).result()
        embedder = HashEmbedder(dim=64)
        return Engine(store=store, index=SearchIndex(settings.index_dir, embedder), embedder=embedder,
                      chat=FailingChatModel(), counter=WordTokenCounter(), executors=ex,
                      config=EngineConfig(llm_intent="off"))

    monkeypatch.setattr("app.main.build_engine", build_engine)
    data = ["--data-dir", str(tmp_path / "d")]
    assert main([*data, "ask", "What is on the agenda?"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pcm: error: turn ") and "got no answer: llama_decode returned -3 (out of memory)" in err[-1]
    assert sum(line.startswith("pcm: error") for line in err) == 1
    assert main([*data, "ask", "And the budget?", "--json"]) == 1  # the record is printed, the failure still said
    out, err_json = capsys.readouterr()
    assert json.loads(out)["finish_reason"] == "error" and err_json.strip().splitlines()[-1].startswith("pcm: error")


@pytest.mark.model
def test_a_3000_word_paste_is_answered_and_show_names_the_cut(tmp_path: Path) -> None:
    env = {**os.environ, "PCM_DATA_DIR": str(tmp_path / "d")}
    paste = long_paste(3000)
    asked = subprocess.run([sys.executable, "-m", "app.cli", "ask", paste, "--json"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert asked.returncode == 0, asked.stderr[-2000:]
    record = json.loads(asked.stdout)
    assert record["finish_reason"] in ("stop", "length") and record["output"].strip()
    usage, charge = record["usage"], record["build"]["input"]
    assert usage["status"] == "success" and usage["prompt_tokens"] <= 2048 - 256
    cut = charge["shortened"]
    assert cut is not None and cut["tokens"] > 2048 and cut["kept_tokens"] < cut["tokens"]
    shown = subprocess.run([sys.executable, "-m", "app.cli", "show", "turn", record["turn_id"]],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert re.search(rf"input: shortened to fit the model: kept {cut['kept_tokens']} of {cut['tokens']} tokens",
                     shown.stdout)
    assert f"cut {cut['cut'][0]} (" in shown.stdout  # every cut span is named
    assert "was shortened" in shown.stdout  # the context sent said so
    replayed = subprocess.run([sys.executable, "-m", "app.cli", "replay", "turn", record["turn_id"]],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert replayed.returncode == 0 and "reproduced exactly" in replayed.stdout, replayed.stdout + replayed.stderr[-2000:]
