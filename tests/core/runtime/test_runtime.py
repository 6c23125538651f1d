"""Executors and ChatStream: tokens cross from the llm thread to the loop; stop is prompt."""

from __future__ import annotations

import asyncio
import threading

import pytest

from app.core.ports import GenerationParams, WordTokenCounter
from app.core.runtime.executors import ChatStream, Executors
from app.llm.fakes import HashEmbedder, ScriptedChatModel


def test_run_uses_one_named_thread_per_resource() -> None:
    async def main() -> set[str]:
        ex = Executors()
        try:
            names = await asyncio.gather(
                *(ex.run("store", lambda: threading.current_thread().name) for _ in range(5))
            )
            other = await ex.run("embed", lambda: threading.current_thread().name)
        finally:
            ex.shutdown()
        return set(names) | {other}

    names = asyncio.run(main())
    assert len(names) == 2
    assert any(n.startswith("pcm-store") for n in names)
    assert any(n.startswith("pcm-embed") for n in names)


def test_stream_delivers_tokens_on_the_loop_thread() -> None:
    model = ScriptedChatModel(["one two three four"])

    async def main() -> tuple[list[str], list[str], str]:
        ex = Executors()
        loop_thread = threading.current_thread().name
        threads: list[str] = []
        try:
            stream = ChatStream(ex, model, [{"role": "user", "content": "hi"}])
            tokens = []
            async for tok in stream:
                threads.append(threading.current_thread().name)
                tokens.append(tok)
            assert stream.result is not None
            return tokens, threads, loop_thread + "|" + stream.result.text
        finally:
            ex.shutdown()

    tokens, threads, tail = asyncio.run(main())
    assert tokens == ["one", " two", " three", " four"]
    assert set(threads) == {tail.split("|")[0]}
    assert tail.split("|")[1] == "one two three four"


def test_stop_cancels_within_one_token() -> None:
    model = ScriptedChatModel([" ".join(f"w{i}" for i in range(200))], token_delay_s=0.005)

    async def main() -> tuple[int, str]:
        ex = Executors()
        try:
            stream = ChatStream(ex, model, [{"role": "user", "content": "go"}])
            seen = 0
            async for _ in stream:
                seen += 1
                if seen == 3:
                    stream.stop()
            assert stream.result is not None
            return stream.result.usage.completion_tokens, stream.result.finish_reason
        finally:
            ex.shutdown()

    produced, reason = asyncio.run(main())
    assert reason == "cancelled"
    # tokens already queued when stop() ran may arrive, but generation halts at the next check
    assert 3 <= produced <= 5


def test_fake_usage_and_json() -> None:
    model = ScriptedChatModel(['{"a": 1}', "not json"])
    schema = {"type": "object"}
    ok = model.chat([{"role": "user", "content": "x"}], json_schema=schema)
    bad = model.chat([{"role": "user", "content": "x"}], json_schema=schema)
    assert ok.parsed == {"a": 1} and bad.parsed is None
    assert ok.usage.completion_tokens == 2 and ok.usage.prompt_tokens > 0
    limited = ScriptedChatModel(["a b c d"]).chat(
        [{"role": "user", "content": "x"}], params=GenerationParams(max_tokens=2)
    )
    assert limited.text == "a b" and limited.finish_reason == "length"


def test_word_counter_matches_the_eval_yardstick() -> None:
    counter = WordTokenCounter()
    assert counter.count("") == 0
    assert counter.count("one") == 2  # ceil(1.3)
    assert counter.count("a b c d e f g h i j") == 13
    assert counter.count("Alice: hello there") == 4  # ceil(3.9)


def test_hash_embedder_is_normalised_and_lexical() -> None:
    emb = HashEmbedder(dim=128)
    vecs = emb.embed(["red apple pie", "apple pie recipe", "quantum field theory"])
    assert vecs.shape == (3, 128)
    norms = (vecs**2).sum(axis=1)
    assert norms == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]
