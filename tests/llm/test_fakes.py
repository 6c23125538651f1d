"""The scripted fakes honour the same contracts as the real adapters."""

from __future__ import annotations

import numpy as np

from app.core.ports import CancelToken, ChatModel, Embedder, GenerationParams
from app.llm.fakes import HashEmbedder, ScriptedChatModel


def test_fakes_implement_the_ports() -> None:
    assert isinstance(ScriptedChatModel(), ChatModel)
    assert isinstance(HashEmbedder(), Embedder)


def test_scripted_stream_and_usage() -> None:
    model = ScriptedChatModel(["one two three four", '{"a": 1}'])
    pieces: list[str] = []
    result = model.chat([{"role": "user", "content": "hi"}], on_token=pieces.append, stage="plan")
    assert "".join(pieces) == result.text == "one two three four"
    assert result.usage.completion_tokens == 4 and result.usage.stage == "plan"
    parsed = model.chat([{"role": "user", "content": "json"}], json_schema={"type": "object"})
    assert parsed.parsed == {"a": 1}


def test_scripted_cancel_and_length() -> None:
    model = ScriptedChatModel(["a b c d e f"])
    cancel = CancelToken()
    pieces: list[str] = []

    def on_token(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            cancel.cancel()

    result = model.chat([{"role": "user", "content": "x"}], on_token=on_token, cancel=cancel)
    assert result.finish_reason == "cancelled" and len(pieces) == 2
    short = model.chat([{"role": "user", "content": "x"}], params=GenerationParams(max_tokens=3))
    assert short.finish_reason == "length" and short.usage.completion_tokens == 3


def test_hash_embedder_rows_are_unit_vectors() -> None:
    vectors = HashEmbedder(dim=32).embed(["alpha beta", "alpha gamma", "zeta"])
    assert vectors.shape == (3, 32) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
