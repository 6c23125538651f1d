"""Chat providers (issue 15): the in-process llama.cpp model, OpenAI-compatible HTTP endpoints
(Ollama through its ``/v1`` API), the registry that orders them with retry, fallback and
spending limits, and their settings file (``providers.json`` in the data folder).

``build_registry`` is what the composition root calls; ``settings`` holds the functions the CLI,
the desktop and the MCP server use to change the configuration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from app.core.ports import ChatModel, ChatProvider
from app.llm.providers.local import LocalProvider
from app.llm.providers.openai_compat import OpenAICompatibleProvider
from app.llm.providers.registry import ProviderRegistry, Spending, day_and_month
from app.llm.providers.settings import (
    LOCAL_ID,
    ProviderConfig,
    ProviderSettings,
    add_provider,
    load_providers,
)

__all__ = [
    "LOCAL_ID", "LocalProvider", "OpenAICompatibleProvider", "ProviderConfig", "ProviderRegistry",
    "ProviderSettings", "Spending", "add_provider", "build_registry", "day_and_month", "make_provider",
    "refresh_registry",
]


def make_provider(config: ProviderConfig, local: ChatModel) -> ChatProvider:
    """The provider a config describes; an HTTP one counts tokens with ``local``'s tokenizer."""
    if config.kind == LOCAL_ID:
        return LocalProvider(local, name=config.label)
    return OpenAICompatibleProvider(config, counter=local.count_tokens)


def build_registry(data_dir: str | os.PathLike[str], local: ChatModel, *,
                   spent_today: Mapping[str, float] | None = None,
                   spent_this_month: Mapping[str, float] | None = None,
                   settings: ProviderSettings | None = None) -> ProviderRegistry:
    """The registry over ``data_dir``'s providers (in their order), ``local`` as the in-process
    model, spending seeded from the store's record of today and this month."""
    settings = settings or load_providers(data_dir)
    pairs = [(make_provider(config, local), config) for config in settings.ordered()]
    spending = Spending()
    spending.seed(spent_today or {}, spent_this_month or {})
    counter = next(p for p, _ in pairs if p.id == LOCAL_ID)
    registry = ProviderRegistry(pairs, settings, counter=counter, spending=spending)
    registry.reloader = lambda: refresh_registry(registry, data_dir)
    return registry


def refresh_registry(registry: ProviderRegistry, data_dir: str | os.PathLike[str]) -> ProviderSettings:
    """Apply ``data_dir``'s provider settings to a running registry (after ``add_provider`` and
    friends) from its next call on; return them. The in-process model is the registry's own."""
    settings = load_providers(data_dir)
    local = registry.get(LOCAL_ID)
    model = local.model if isinstance(local, LocalProvider) else registry._counting
    registry.replace([(make_provider(config, model), config) for config in settings.ordered()], settings)
    return settings
