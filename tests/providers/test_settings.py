"""Provider settings: the file in the data folder, the privacy rules (no key stored, nothing off
the machine without confirmation) and seed 004 §6's configure_llm_provider names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.llm.providers.settings import (
    LOCAL_ID,
    ProviderSettingsError,
    add_agent_provider,
    add_provider,
    is_loopback,
    load_providers,
    remove_provider,
    set_default,
    set_limits,
    settings_path,
)


def test_loopback_is_told_from_off_machine_without_dns() -> None:
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:9/v1", "http://127.8.0.1/v1"):
        assert is_loopback(url), url
    for url in ("https://api.openai.com/v1", "http://192.168.1.5:8080/v1", "http://localhost.example.com/v1", "",
                "http://evil.localhost:8080/v1"):  # a *.localhost name resolves wherever the resolver says
        assert not is_loopback(url), url


def test_without_a_file_only_the_in_process_model(tmp_path: Path) -> None:
    settings = load_providers(tmp_path)
    assert [p.id for p in settings.ordered()] == [LOCAL_ID] and settings.default == LOCAL_ID


def test_a_loopback_endpoint_is_added_and_ordered_first_as_default(tmp_path: Path) -> None:
    added = add_provider(tmp_path, {"id": "lab", "kind": "openai", "base_url": "http://127.0.0.1:8080/v1",
                                    "model": "qwen", "price_in_per_1k": 0.5}, set_as_default=True)
    assert added.type == "external" and not added.off_machine
    settings = load_providers(tmp_path)
    assert [p.id for p in settings.ordered()] == ["lab", LOCAL_ID]
    set_default(tmp_path, LOCAL_ID)
    assert [p.id for p in load_providers(tmp_path).ordered()] == [LOCAL_ID, "lab"]
    remove_provider(tmp_path, "lab")
    assert [p.id for p in load_providers(tmp_path).ordered()] == [LOCAL_ID]
    with pytest.raises(ProviderSettingsError, match="last resort"):
        remove_provider(tmp_path, LOCAL_ID)


def test_an_off_machine_endpoint_needs_confirmation(tmp_path: Path) -> None:
    config = {"id": "cloud", "kind": "openai", "base_url": "https://api.example.com/v1", "model": "big",
              "api_key_env": "EXAMPLE_KEY"}
    with pytest.raises(ProviderSettingsError, match="--yes-send-off-machine"):
        add_provider(tmp_path, config)
    assert not settings_path(tmp_path).exists()
    added = add_provider(tmp_path, config, allow_off_machine=True)
    assert added.off_machine and added.off_machine_confirmed


def test_a_key_is_never_stored_only_the_name_of_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProviderSettingsError, match="never stored"):
        add_provider(tmp_path, {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key": "sk-1"})
    with pytest.raises(ProviderSettingsError, match="NAME of an environment variable"):
        add_provider(tmp_path, {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m",
                                "api_key_env": "sk-secret-value"})
    monkeypatch.setenv("LAB_KEY", "sk-the-real-key")
    added = add_provider(tmp_path, {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m",
                                    "api_key_env": "LAB_KEY"})
    assert added.api_key() == "sk-the-real-key"
    assert "sk-the-real-key" not in settings_path(tmp_path).read_text(encoding="utf-8")


def test_seed_004_configure_llm_provider_names(tmp_path: Path) -> None:
    added = add_provider(tmp_path, {"provider": "ollama", "model": "llama3.2", "maxTokens": 300, "temperature": 0.1},
                         set_as_default=True)
    assert (added.id, added.kind, added.base_url) == ("ollama", "ollama", "http://127.0.0.1:11434/v1")
    assert added.max_tokens == 300 and added.temperature == 0.1 and not added.off_machine
    with pytest.raises(ProviderSettingsError, match="not this machine"):
        add_provider(tmp_path, {"provider": "anthropic", "model": "claude", "apiKeyEnv": "ANTHROPIC_API_KEY"})
    hosted = add_provider(tmp_path, {"provider": "google", "model": "gemini", "apiKeyEnv": "GEMINI_API_KEY"},
                          allow_off_machine=True)
    assert hosted.kind == "openai" and hosted.base_url.startswith("https://generativelanguage.googleapis.com/")
    assert load_providers(tmp_path).default == "ollama"


def test_limits_and_a_broken_file_say_what_to_do(tmp_path: Path) -> None:
    set_limits(tmp_path, daily=1.5, monthly=20)
    settings = load_providers(tmp_path)
    assert (settings.daily_limit, settings.monthly_limit) == (1.5, 20)
    assert set_limits(tmp_path, clear=True).daily_limit is None
    settings_path(tmp_path).write_text(json.dumps({"providers": [{"id": "x"}]}), encoding="utf-8")
    with pytest.raises(ProviderSettingsError, match="providers.0.kind"):
        load_providers(tmp_path)


def test_an_mcp_client_adds_new_entries_only_and_never_redirects_the_users_provider(tmp_path: Path) -> None:
    """configure_llm_provider (``add_agent_provider``): the user's "openai" entry, its key variable
    and the default stay as the user set them; the client's entry is new, named as the client's,
    tried after the user's; the same entry again is not added twice."""
    mine = add_provider(tmp_path, {"provider": "openai", "endpoint": "http://127.0.0.1:8080/v1", "model": "gpt",
                                   "apiKeyEnv": "OPENAI_API_KEY"}, set_as_default=True)
    agent = {"provider": "openai", "endpoint": "http://127.0.0.1:9999/v1", "model": "gpt"}
    with pytest.raises(ProviderSettingsError, match="OPENAI_API_KEY is the key of a provider you configured"):
        add_agent_provider(tmp_path, {**agent, "apiKeyEnv": "OPENAI_API_KEY"})
    added = add_agent_provider(tmp_path, agent)
    assert added.id == "mcp-openai" and "MCP client" in added.name and added.api_key_env == ""
    assert add_agent_provider(tmp_path, agent).id == "mcp-openai"  # the same again: the same entry
    other = add_agent_provider(tmp_path, {**agent, "model": "other"})
    assert other.id == "mcp-openai-2"
    settings = load_providers(tmp_path)
    assert settings.default == "openai" and settings.get("openai") == mine
    assert [p.id for p in settings.ordered()] == ["openai", "mcp-openai", "mcp-openai-2", LOCAL_ID]
    with pytest.raises(ProviderSettingsError, match="not this machine"):
        add_agent_provider(tmp_path, {**agent, "endpoint": "http://evil.localhost:9/v1"})


def test_processes_adding_providers_at_once_lose_none(tmp_path: Path) -> None:
    """Each change re-reads providers.json under its lock: four processes adding twenty providers
    each (real processes, at once) leave all eighty, never one written back from a stale copy."""
    code = ("import sys\nfrom app.llm.providers.settings import add_provider\n"
            "for i in range(20):\n"
            "    add_provider(sys.argv[1], {'id': f'p{sys.argv[2]}-{i}', 'kind': 'openai', "
            "'base_url': 'http://127.0.0.1:9/v1', 'model': 'm'})\n")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(n)], env=env) for n in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    ids = {p.id for p in load_providers(tmp_path).providers}
    assert {f"p{n}-{i}" for n in range(4) for i in range(20)} <= ids
