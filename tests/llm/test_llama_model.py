"""LlamaChatModel against the real SmolLM2 GGUF: streaming, cancel, JSON schema, usage, counting."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from app.core.errors import ModelError
from app.core.ports import CancelToken, ChatModel, GenerationParams
from tests.llm.gguf_util import write_gguf

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "Write three sentences about the sea."}]


def test_implements_the_port(chat_model: Any) -> None:
    assert isinstance(chat_model, ChatModel)
    assert chat_model.name == "SmolLM2-135M-Instruct" and chat_model.context_size == 2048


def test_streaming_pieces_concatenate_to_the_text(chat_model: Any) -> None:
    pieces: list[str] = []
    result = chat_model.chat(MESSAGES, params=GenerationParams(max_tokens=48), on_token=pieces.append)
    assert len(pieces) >= 5
    assert "".join(pieces) == result.text and result.text.strip()
    assert result.finish_reason in ("stop", "length")


def test_usage_record_is_filled(chat_model: Any) -> None:
    params = GenerationParams(max_tokens=12, seed=3)
    result = chat_model.chat(MESSAGES, params=params, stage="plan")
    usage = result.usage
    assert result.finish_reason == "length"
    assert usage.stage == "plan" and usage.model == "SmolLM2-135M-Instruct" and usage.provider == "llama.cpp"
    assert usage.params["max_tokens"] == 12 and usage.params["seed"] == 3
    assert usage.prompt_tokens == chat_model.count_chat_tokens(MESSAGES)
    assert usage.completion_tokens == 12
    assert usage.total_tokens == usage.prompt_tokens + 12
    assert usage.first_token_latency_ms is not None and 0 < usage.first_token_latency_ms <= usage.latency_ms
    assert usage.status == "success" and usage.error == ""


def test_completion_tokens_match_the_tokenizer_on_natural_stop(chat_model: Any) -> None:
    result = chat_model.chat([{"role": "user", "content": "Say hello."}], params=GenerationParams(max_tokens=64))
    assert result.finish_reason == "stop"
    assert result.usage.completion_tokens == chat_model.count_tokens(result.text)


def test_prompt_count_is_exactly_what_llama_evaluates(chat_model: Any) -> None:
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}]
    chat_model.chat(messages, params=GenerationParams(max_tokens=1))
    # After one sampled token llama.cpp has evaluated exactly the prompt.
    assert chat_model._llm.n_tokens == chat_model.count_chat_tokens(messages)


def test_same_seed_same_text_without_prompt_cache(chat_model: Any) -> None:
    params = GenerationParams(max_tokens=20, temperature=0.8, seed=7)
    chat_model.prompt_cache = False
    try:
        texts = {chat_model.chat(MESSAGES, params=params).text for _ in range(3)}
        chat_model.chat([{"role": "user", "content": "Something else."}], params=GenerationParams(max_tokens=3))
        texts.add(chat_model.chat(MESSAGES, params=params).text)
    finally:
        chat_model.prompt_cache = True
    assert len(texts) == 1


def test_cancel_stops_within_one_token(chat_model: Any) -> None:
    cancel = CancelToken()
    pieces: list[str] = []

    def on_token(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 3:
            cancel.cancel()

    result = chat_model.chat(MESSAGES, params=GenerationParams(max_tokens=64), on_token=on_token, cancel=cancel)
    assert result.finish_reason == "cancelled" and result.usage.status == "cancelled"
    assert len(pieces) == 3 and result.text == "".join(pieces)
    assert result.usage.completion_tokens == 3


def test_cancel_from_another_thread(chat_model: Any) -> None:
    cancel = CancelToken()
    pieces: list[str] = []
    counted_at_cancel: list[int] = []
    started = threading.Event()

    def on_token(piece: str) -> None:
        pieces.append(piece)
        started.set()

    def stopper() -> None:
        started.wait(30)
        time.sleep(0.05)
        counted_at_cancel.append(len(pieces))
        cancel.cancel()

    thread = threading.Thread(target=stopper)
    thread.start()
    result = chat_model.chat(MESSAGES, params=GenerationParams(max_tokens=200), on_token=on_token, cancel=cancel)
    thread.join()
    assert result.finish_reason == "cancelled"
    assert len(pieces) <= counted_at_cancel[0] + 1  # at most the token already in flight


def test_cancel_before_start_does_nothing(chat_model: Any) -> None:
    cancel = CancelToken()
    cancel.cancel()
    pieces: list[str] = []
    result = chat_model.chat(MESSAGES, on_token=pieces.append, cancel=cancel)
    assert result.finish_reason == "cancelled" and result.text == "" and not pieces
    assert result.usage.completion_tokens == 0


def test_json_schema_constrains_the_output(chat_model: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["question", "task", "chat"]},
            "urgent": {"type": "boolean"},
            "steps": {"type": "integer", "minimum": 0, "maximum": 9},
        },
        "required": ["mode", "urgent", "steps"],
        "additionalProperties": False,
    }
    messages = [
        {"role": "system", "content": "Classify the user's message. Reply with JSON only."},
        {"role": "user", "content": "Please refactor the parser and add tests, it is blocking the release."},
    ]
    pieces: list[str] = []
    result = chat_model.chat(messages, params=GenerationParams(max_tokens=96), stage="intent",
                             json_schema=schema, on_token=pieces.append)
    assert result.finish_reason == "stop", result.text
    assert isinstance(result.parsed, dict)
    jsonschema.validate(result.parsed, schema)
    assert "".join(pieces) == result.text and result.usage.params["json_schema"] is True


def test_json_schema_with_a_short_string(chat_model: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string", "maxLength": 40}, "tags": {"type": "array",
                       "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
        "required": ["title", "tags"],
    }
    result = chat_model.chat([{"role": "user", "content": "Give a title and tags for a note about tea."}],
                             params=GenerationParams(max_tokens=128), json_schema=schema)
    assert result.finish_reason == "stop", result.text
    jsonschema.validate(result.parsed, schema)


def test_prompt_longer_than_context_is_an_error_result(chat_model: Any) -> None:
    long = [{"role": "user", "content": "word " * 3000}]
    result = chat_model.chat(long)
    assert result.finish_reason == "error" and result.usage.status == "error"
    assert "context" in result.usage.error and result.text == ""


def test_count_tokens_matches_the_llama_tokenizer(chat_model: Any, chat_model_path: Path) -> None:
    import llama_cpp

    reference = llama_cpp.Llama(str(chat_model_path), vocab_only=True, verbose=False)
    texts = ["Hello world", "  leading spaces", "Ünïcödé — 東京 🚀", "<|im_start|> not special here",
             "a" * 500, "line\nbreaks\tand tabs"]
    for text in texts:
        expected = len(reference.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        assert chat_model.count_tokens(text) == expected, text
    assert chat_model.count_tokens("") == 0
    reference.close()


def test_count_tokens_from_another_thread_while_generating(chat_model: Any) -> None:
    generating = threading.Event()
    done = threading.Event()
    pieces: list[str] = []
    outcome: dict[str, Any] = {}

    def on_token(piece: str) -> None:
        pieces.append(piece)
        generating.set()

    def run() -> None:
        outcome["result"] = chat_model.chat(MESSAGES, params=GenerationParams(max_tokens=96), on_token=on_token)
        done.set()

    expected = chat_model.count_tokens("The quick brown fox jumps over the lazy dog.")
    worker = threading.Thread(target=run)
    worker.start()
    assert generating.wait(30)
    counts, during = [], 0
    while not done.is_set() and len(counts) < 2000:
        counts.append(chat_model.count_tokens("The quick brown fox jumps over the lazy dog."))
        chat_model.count_chat_tokens(MESSAGES)
        during += 0 if done.is_set() else 1
    worker.join(60)
    assert during > 0, "generation finished before any concurrent count"
    assert set(counts) == {expected}
    assert outcome["result"].text == "".join(pieces)


def test_bad_schema_raises_model_error(chat_model: Any) -> None:
    with pytest.raises(ModelError, match="JSON schema cannot be turned into a grammar"):
        chat_model.chat(MESSAGES, json_schema={"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})


def test_unloadable_file_is_a_one_line_error(tmp_path: Path) -> None:
    from app.llm.llama import LlamaChatModel

    path = write_gguf(tmp_path / "alien.gguf")  # a valid header, an architecture nobody knows
    with pytest.raises(ModelError) as info:
        LlamaChatModel(path)
    message = str(info.value)
    assert "alien.gguf" in message and "unknown model architecture" in message and "\n" not in message


def test_probe_bad_file_in_child_process(tmp_path: Path) -> None:
    from app.llm.gguf import probe_gguf

    path = write_gguf(tmp_path / "alien.gguf", metadata={"general.architecture": "llama"})
    with pytest.raises(ModelError) as info:
        probe_gguf(path, timeout_s=60)
    message = str(info.value)
    assert "alien.gguf" in message and "llama.cpp cannot load" in message and "\n" not in message


def test_probe_good_file(chat_model_path: Path) -> None:
    from app.llm.gguf import probe_gguf

    probe_gguf(chat_model_path, timeout_s=60)


def test_real_file_truncated_is_caught_by_the_header_check(tmp_path: Path, chat_model_path: Path) -> None:
    from app.llm.gguf import validate_gguf

    path = tmp_path / "cut.gguf"
    with chat_model_path.open("rb") as src:
        path.write_bytes(src.read(5_000_000))  # a real header, most tensor data missing
    with pytest.raises(ModelError, match=r"cut\.gguf is truncated \(5000000 of \d+ bytes\)"):
        validate_gguf(path)


def test_template_rejection_is_an_error_not_a_crash(chat_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def reject(**kwargs: Any) -> Any:
        raise ValueError("Conversation roles must alternate user/assistant/user/assistant/...")

    monkeypatch.setattr(chat_model, "_formatter", reject)
    with pytest.raises(ModelError, match="rejected the messages"):
        chat_model.count_chat_tokens(MESSAGES)
    result = chat_model.chat(MESSAGES)
    assert result.finish_reason == "error" and "roles must alternate" in result.usage.error
