"""The in-process model as a ``ChatProvider``: the default, and the fallback of last resort.

Wraps a loaded ``ChatModel`` (``app.llm.llama.LlamaChatModel``, or a scripted fake in tests):
calls go straight through, the usage record names this provider, and ``suspend`` (the KV-state
swap that lets an urgent call cut into a running generation) is passed on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from app.core.ports import CancelToken, ChatMessage, ChatModel, ChatResult, GenerationParams, ModelInfo, TokenCallback
from app.llm.providers.settings import LOCAL_ID


class LocalProvider:
    """``ChatProvider`` over a model in this process (no cost, nothing leaves the machine)."""

    type = "local"

    def __init__(self, model: ChatModel, *, provider_id: str = LOCAL_ID, name: str = "in-process llama.cpp",
                 kind: str = "llama.cpp") -> None:
        self.model = model
        self.id = provider_id
        self.name = name
        self.kind = kind
        self.context_size = model.context_size

    def is_available(self) -> bool:
        return True  # loaded before the provider was made

    def max_tokens(self) -> int:
        return self.model.context_size

    def estimate_cost(self, prompt_tokens: int, completion_tokens: int) -> float:  # noqa: ARG002 - free
        return 0.0

    def model_info(self) -> ModelInfo:
        return ModelInfo(provider_id=self.id, provider_name=self.name, kind=self.kind, type="local",
                         model=self.model.name, context_size=self.model.context_size, json_schema=True)

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.model.count_chat_tokens(messages)

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        params: GenerationParams | None = None,
        stage: str = "answer",
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> ChatResult:
        result = self.model.chat(messages, params=params, stage=stage, json_schema=json_schema,
                                 on_token=on_token, cancel=cancel)
        result.usage = result.usage.model_copy(update={"provider": self.id, "off_machine": False})
        return result

    @contextlib.contextmanager
    def suspend(self) -> Iterator[None]:
        """The model's own ``suspend`` (set the running generation aside), if it has one."""
        inner = getattr(self.model, "suspend", None)
        with inner() if callable(inner) else contextlib.nullcontext():
            yield

    def close(self) -> None:
        close = getattr(self.model, "close", None)
        if callable(close):
            close()
