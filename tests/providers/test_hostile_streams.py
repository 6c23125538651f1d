"""Every call to an endpoint has deadlines the server cannot stretch (a token within ``timeout_s``
of the start and of the one before; the whole call within ``timeout_s`` + the answer cap at
``min_tokens_per_s``) and the app's own answer cap, against a real hostile SSE server on 127.0.0.1
(tests/providers/hostile.py): each mode ends within its deadline with one line, and the answer
falls back to the next provider when nothing was streamed yet (after that, the next request does)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from app.core.ports import ChatResult, GenerationParams
from app.llm.fakes import ScriptedProvider
from app.llm.providers import (
    LocalProvider,
    OpenAICompatibleProvider,
    ProviderConfig,
    ProviderRegistry,
    ProviderSettings,
)
from app.llm.providers.settings import local_provider
from tests.providers.hostile import hostile_server

DEADLINE_S = 3.0  # wide enough that a loaded machine does not miss a first token a local server sends at once
MESSAGES = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    import openai  # noqa: F401 - its first import takes seconds on a loaded machine: not part of a call

    with hostile_server() as url:
        yield url


def _registry(url: str, mode: str, min_tokens_per_s: float = 2.0) -> ProviderRegistry:
    config = ProviderConfig(id="hostile", kind="openai", base_url=f"{url}/{mode}/v1", model="hostile",
                            timeout_s=DEADLINE_S, min_tokens_per_s=min_tokens_per_s, json_schema_style="none")
    local = LocalProvider(ScriptedProvider("inner", ["local answer"]))
    settings = ProviderSettings(default="hostile", backoff_s=0.05, check_every_s=3600)
    return ProviderRegistry([(OpenAICompatibleProvider(config), config), (local, local_provider())], settings,
                            sleep=lambda _s: None)


def _timed_chat(registry: ProviderRegistry, max_tokens: int = 64) -> tuple[ChatResult, float]:
    """The call's result and seconds; fails (instead of hanging the suite) past 3 deadlines."""
    out: list[ChatResult] = []
    started = time.monotonic()
    worker = threading.Thread(target=lambda: out.append(registry.chat(MESSAGES, params=GenerationParams(
        max_tokens=max_tokens))), daemon=True)
    worker.start()
    worker.join(DEADLINE_S * 3 + 8)
    assert out, f"the call did not end within {DEADLINE_S * 3 + 8:g} s"
    return out[0], time.monotonic() - started


@pytest.mark.parametrize("mode", ["silent", "headers", "keepalive", "drip"])
def test_a_stream_that_never_answers_ends_at_the_deadline_and_falls_back(endpoint: str, mode: str) -> None:
    result, took = _timed_chat(_registry(endpoint, mode))
    assert took < DEADLINE_S + 1.5, f"{mode}: {took:.1f} s"
    assert result.text == "local answer" and result.usage.provider == "llama.cpp"
    failed = [n for n in result.usage.notes if n.startswith("hostile failed")]
    assert len(failed) == 1 and "\n" not in failed[0] and f"sent no token for {DEADLINE_S:g} s" in failed[0]
    assert not [n for n in result.usage.notes if n.startswith("retried")]  # a late call is not tried again


def test_an_endless_token_stream_stops_at_the_apps_own_cap(endpoint: str) -> None:
    result, took = _timed_chat(_registry(endpoint, "endless"), max_tokens=40)
    assert took < DEADLINE_S + 1.5
    assert result.finish_reason == "length" and result.text == " more" * 40 and result.usage.provider == "hostile"


@pytest.mark.parametrize(("mode", "rate", "said", "took_s"), [
    ("trickle", 400.0, f"did not finish within {DEADLINE_S + 2.5:g} s", DEADLINE_S + 2.5),  # + a cap of 1,000 at 400/s
    ("stall", 2.0, f"sent no token for {DEADLINE_S:g} s", DEADLINE_S),
])
def test_a_stream_that_never_finishes_is_cut_and_the_next_request_falls_back(endpoint: str, mode: str, rate: float,
                                                                             said: str, took_s: float) -> None:
    registry = _registry(endpoint, mode, rate)
    result, took = _timed_chat(registry, max_tokens=1000)
    assert took < took_s + 1.5
    assert result.finish_reason == "error" and result.text.strip()
    error = result.usage.error
    assert "\n" not in error and said in error
    assert "the next request goes to in-process llama.cpp" in error
    again, _ = _timed_chat(registry)
    assert again.text == "local answer" and any("hostile" in n for n in again.usage.notes)


def test_an_answer_that_finished_is_kept_when_the_connection_stays_open(endpoint: str) -> None:
    result, took = _timed_chat(_registry(endpoint, "finished-open"))
    assert result.finish_reason == "stop" and result.text == "all said" and result.usage.provider == "hostile"
    assert took < DEADLINE_S + 1.5


def test_an_endpoint_that_repeats_the_key_does_not_get_it_into_the_answer(endpoint: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTILE_KEY", "sk-secret-0123456789")
    config = ProviderConfig(id="hostile", kind="openai", base_url=f"{endpoint}/echo-key/v1", model="hostile",
                            api_key_env="HOSTILE_KEY", timeout_s=DEADLINE_S, json_schema_style="none")
    shown: list[str] = []
    result = OpenAICompatibleProvider(config).chat(MESSAGES, on_token=shown.append)
    assert result.text == "you sent Bearer [API key]" == "".join(shown)
    assert "sk-secret" not in result.model_dump_json()
