"""Testing one provider: reachable, then a short reply with its first-token latency and cost
(``pcm providers test``, Settings → Providers → Test)."""

from __future__ import annotations

import time

from app.core.errors import ProviderError
from app.core.ports import ChatModel, GenerationParams
from app.llm.providers.local import LocalProvider
from app.llm.providers.openai_compat import OpenAICompatibleProvider
from app.llm.providers.settings import LOCAL_ID, ProviderConfig


def _words(text: str) -> int:
    return -(-len(text.split()) * 13 // 10)


def check_provider(config: ProviderConfig, local: ChatModel | None = None) -> tuple[bool, str]:
    """(answered, one line). The in-process provider is asked only when ``local`` is given."""
    if config.kind == LOCAL_ID:
        if local is None:
            return True, f"{config.id}: the in-process model (always there, the last resort)"
        provider: LocalProvider | OpenAICompatibleProvider = LocalProvider(local)
    else:
        provider = OpenAICompatibleProvider(config, counter=local.count_tokens if local is not None else _words)
        started = time.perf_counter()
        if not provider.is_available():
            return False, f"{config.id}: not reachable at {config.base_url}"
        reach = f"reachable in {(time.perf_counter() - started) * 1000:.0f} ms; "
    try:
        result = provider.chat([{"role": "user", "content": "Reply with the word OK."}],
                               params=GenerationParams(max_tokens=8), stage="test")
    except ProviderError as exc:
        return False, f"{config.id}: {exc}"
    u = result.usage
    line = (f"{config.id}: {reach if config.kind != LOCAL_ID else ''}answered {result.text.strip()[:60]!r}; "
            f"first token {u.first_token_latency_ms or 0:.0f} ms, {u.prompt_tokens}+{u.completion_tokens} tokens, "
            f"cost {u.cost:.6f}" + (f"; {u.error}" if u.error else ""))
    return result.finish_reason != "error", line
