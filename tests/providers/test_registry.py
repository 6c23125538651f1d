"""The provider registry over scripted providers: order, retry with backoff, fallback before the
first token, a clear stop after it, spending limits, and what each call's usage records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.core.ports import ChatProvider, GenerationParams
from app.llm.fakes import ScriptedProvider
from app.llm.providers import (
    LocalProvider,
    ProviderConfig,
    ProviderRegistry,
    ProviderSettings,
    Spending,
    build_registry,
    refresh_registry,
)
from app.llm.providers.settings import LOCAL_ID, add_provider, local_provider

MESSAGES = [{"role": "user", "content": "hello there"}]


def _registry(*remote: ScriptedProvider, settings: ProviderSettings | None = None,
              spending: Spending | None = None) -> tuple[ProviderRegistry, list[float]]:
    settings = settings or ProviderSettings(backoff_s=0.1, check_every_s=0)
    local = LocalProvider(ScriptedProvider("inner", ["local answer"]))
    pairs: list[tuple[ChatProvider, ProviderConfig]] = [
        (p, ProviderConfig(id=p.id, kind="openai", base_url="http://127.0.0.1:9/v1", model=p.name,
                           price_in_per_1k=p.price_in_per_1k, price_out_per_1k=p.price_out_per_1k))
        for p in remote]
    pairs.append((local, local_provider()))
    slept: list[float] = []
    return ProviderRegistry(pairs, settings, spending=spending, sleep=slept.append), slept


def test_the_registry_is_a_chat_provider_and_answers_through_the_first() -> None:
    remote = ScriptedProvider("lab", ["remote answer"])
    registry, _ = _registry(remote)
    assert isinstance(remote, ChatProvider) and isinstance(registry._entries[-1].provider, ChatProvider)
    pieces: list[str] = []
    result = registry.chat(MESSAGES, on_token=pieces.append)
    assert result.text == "remote answer" == "".join(pieces)
    assert result.usage.provider == "lab" and result.usage.notes == []
    # counting is the in-process model's, whoever answers
    assert registry.count_tokens("a b c") == registry._counting.count_tokens("a b c")


def test_transient_errors_are_retried_with_backoff_then_answered() -> None:
    remote = ScriptedProvider("lab", ["remote answer"])
    remote.fail_times = 2
    registry, slept = _registry(remote)
    result = registry.chat(MESSAGES)
    assert result.usage.provider == "lab" and result.text == "remote answer"
    assert slept == [0.1, 0.2]
    assert [n.split(":")[0] for n in result.usage.notes] == ["retried lab after 0.10 s", "retried lab after 0.20 s"]


def test_a_provider_that_is_down_falls_back_and_is_skipped_for_a_while() -> None:
    remote = ScriptedProvider("lab", ["remote answer"])
    remote.available = False
    registry, slept = _registry(remote, settings=ProviderSettings(backoff_s=0.1, check_every_s=1e9))
    registry._entries[0].checked_at = registry._clock()  # it answered a moment ago, then went down
    result = registry.chat(MESSAGES)
    assert result.usage.provider == LOCAL_ID and result.text == "local answer"
    assert len(slept) == 2  # retried, then fell back
    assert "lab failed" in result.usage.notes[-1] and "cannot be reached" in result.usage.notes[-1]
    second = registry.chat(MESSAGES)
    assert second.usage.provider == LOCAL_ID
    assert second.usage.notes[0].startswith("skipped lab: lab failed") and len(slept) == 2


def test_an_availability_check_skips_an_unreachable_endpoint_without_retrying() -> None:
    remote = ScriptedProvider("lab", ["remote answer"])
    remote.available = False
    registry, slept = _registry(remote)  # check_every_s=0: checked before each use
    result = registry.chat(MESSAGES)
    assert result.usage.provider == LOCAL_ID and slept == []
    assert result.usage.notes == ["skipped lab: lab is not reachable at http://127.0.0.1:9/v1"]


def test_a_permanent_error_falls_back_at_once() -> None:
    remote = ScriptedProvider("lab", ["remote answer"])
    remote.fail_times, remote.transient = 1, False
    registry, slept = _registry(remote)
    result = registry.chat(MESSAGES)
    assert result.usage.provider == LOCAL_ID and slept == []


def test_a_failure_mid_answer_stops_it_clearly_and_the_next_request_goes_on() -> None:
    remote = ScriptedProvider("lab", ["one two three four five"])
    remote.break_after = 2
    registry, _ = _registry(remote)
    pieces: list[str] = []
    result = registry.chat(MESSAGES, on_token=pieces.append)
    assert result.finish_reason == "error" and result.text == "one two" == "".join(pieces)
    assert result.usage.provider == "lab" and result.usage.status == "error"
    assert result.usage.error.startswith("lab failed mid-answer, the answer stops here (the connection was reset)")
    assert result.usage.error.endswith("the next request goes to in-process llama.cpp")
    after = registry.chat(MESSAGES)
    assert after.usage.provider == LOCAL_ID and after.text == "local answer"


def test_spending_limits_refuse_priced_calls_and_fall_back() -> None:
    remote = ScriptedProvider("lab", ["remote answer"], price_in_per_1k=1.0, price_out_per_1k=2.0)
    settings = ProviderSettings(check_every_s=0, daily_limit=0.05)
    spending = Spending()
    registry, _ = _registry(remote, settings=settings, spending=spending)
    first = registry.chat(MESSAGES, params=GenerationParams(max_tokens=8))
    assert first.usage.provider == "lab" and first.usage.cost > 0
    assert spending.totals() == (first.usage.cost, first.usage.cost)
    spending.add("lab", 0.05)  # as if other calls spent the rest of today's limit
    refused = registry.chat(MESSAGES, params=GenerationParams(max_tokens=8))
    assert refused.usage.provider == LOCAL_ID and refused.usage.cost == 0
    assert "daily spending limit of 0.0500 for external providers is reached" in refused.usage.notes[0]


def test_a_provider_of_its_own_limit_and_the_monthly_limit() -> None:
    remote = ScriptedProvider("lab", ["remote answer"], price_in_per_1k=1.0)
    spending = Spending()
    spending.seed({}, {"lab": 0.9})
    registry, _ = _registry(remote, settings=ProviderSettings(check_every_s=0, monthly_limit=0.9), spending=spending)
    assert registry.chat(MESSAGES).usage.provider == LOCAL_ID
    registry.settings.monthly_limit = None
    registry._entries[0].config.monthly_limit = 0.5
    refused = registry.chat(MESSAGES)
    assert refused.usage.provider == LOCAL_ID and "monthly spending limit of 0.5000 for lab" in refused.usage.notes[0]


def test_an_unconfirmed_off_machine_provider_is_never_asked() -> None:
    remote = ScriptedProvider("far", ["remote answer"])
    registry, _ = _registry(remote)
    registry._entries[0].config = registry._entries[0].config.model_copy(update={"base_url": "https://example.com/v1"})
    result = registry.chat(MESSAGES)
    assert result.usage.provider == LOCAL_ID and remote.calls == []
    assert "off the machine and was not confirmed" in result.usage.notes[0]


def test_a_call_cutting_into_a_served_answer_goes_to_the_next_provider() -> None:
    remote = ScriptedProvider("lab", ["one two three"])
    registry, _ = _registry(remote)
    nested: list[str] = []

    def cut_in(_piece: str) -> None:  # what UrgentLane does from a token callback
        if not nested:
            with registry.suspend():
                nested.append(registry.chat(MESSAGES).usage.provider)

    result = registry.chat(MESSAGES, on_token=cut_in)
    assert result.usage.provider == "lab" and result.text == "one two three"
    assert nested == [LOCAL_ID]  # lab (one slot, perhaps) is busy with the suspended answer


def test_refreshed_settings_apply_to_a_running_registry(tmp_path: Path) -> None:
    local = ScriptedProvider("inner", ["local answer"])
    registry = build_registry(tmp_path, local)
    assert [p.id for p in registry.providers] == [LOCAL_ID]
    add_provider(tmp_path, {"id": "box", "provider": "ollama", "model": "llama3.2"}, set_as_default=True)
    refresh_registry(registry, tmp_path)
    assert [p.id for p in registry.providers] == ["box", LOCAL_ID]
    assert registry.count_tokens("a b") == local.count_tokens("a b")


def test_the_engine_reloads_providers_changed_while_it_runs(tmp_path: Path, make_engine: Any) -> None:
    registry = build_registry(tmp_path, ScriptedProvider("inner", ["local answer"]))

    async def body(engine: Any) -> list[str]:
        add_provider(tmp_path, {"id": "box", "provider": "ollama", "model": "llama3.2"}, set_as_default=True)
        assert await engine.reload_providers() is True
        return [p.id for p in registry.providers]

    assert make_engine.run(body, chat=registry) == ["box", LOCAL_ID]
    assert make_engine.run(lambda engine: engine.reload_providers()) is False  # a bare chat model


def test_a_sessions_own_provider_is_asked_first_and_the_others_stay_its_fallback() -> None:
    from app.core.ports import SessionGeneration

    lab, box = ScriptedProvider("lab", ["from lab"]), ScriptedProvider("box", ["from box"])
    registry, _ = _registry(lab, box)
    assert registry.chat(MESSAGES).usage.provider == "lab"
    chosen = SessionGeneration(provider="box").params(GenerationParams())
    result = registry.chat(MESSAGES, params=chosen)
    assert (result.usage.provider, result.text) == ("box", "from box")
    assert result.usage.params["provider"] == "box"  # recorded with the turn's usage
    local = registry.chat(MESSAGES, params=GenerationParams(provider=LOCAL_ID))
    assert local.usage.provider == LOCAL_ID
    gone = registry.chat(MESSAGES, params=GenerationParams(provider="removed-since"))
    assert gone.usage.provider == "lab", "a provider no longer configured: the usual order"
