"""Ports: the interfaces the engine needs from the outside world (models, stores).

Adapters in ``app.llm`` and ``app.store`` implement them; scripted fakes in ``app.llm.fakes``
implement the model ports for fast unit tests. Model ports are *blocking* and are only ever called
on their own single-worker executor (see ``app.core.runtime.executors``); the engine awaits them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from app.core.types import ModelUsage


class ModelError(Exception):
    """A model could not be loaded or used. ``str(err)`` is one line meant for the user."""


class CancelToken:
    """A thread-safe flag a long job polls; ``cancel()`` makes it stop at its next check."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


class GenerationParams(BaseModel):
    """Sampling parameters recorded with every call (so a turn can be replayed)."""

    max_tokens: int = 256
    temperature: float = 0.2
    top_p: float = 0.95
    top_k: int = 40
    repeat_penalty: float = 1.1
    seed: int = 0
    stop: list[str] = Field(default_factory=list)


class ChatResult(BaseModel):
    """What a finished (or stopped) chat call returns."""

    text: str
    usage: ModelUsage
    finish_reason: str = "stop"  # stop | length | cancelled | error
    parsed: Any = None  # the parsed JSON value when a json_schema was given and the text parsed


ChatMessage = dict[str, str]  # {"role": ..., "content": ...}
TokenCallback = Callable[[str], None]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way the active model (or a declared estimate) does."""

    name: str

    def count(self, text: str) -> int: ...


@runtime_checkable
class ChatTokenCounter(TokenCounter, Protocol):
    """A counter that can also count a whole chat prompt (the template's own tokens included),
    so the pipeline can prove a prompt fits the model's context before sending it."""

    def count_chat(self, messages: Sequence[ChatMessage]) -> int: ...


@runtime_checkable
class ChatModel(Protocol):
    """A local chat model. Blocking; call it on the ``llm`` executor only."""

    name: str
    context_size: int

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (no special tokens added)."""
        ...

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the full prompt the chat template makes of ``messages``."""
        ...

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
        """Generate a reply, calling ``on_token`` with each piece as it is produced.

        With ``json_schema`` the output is constrained by a grammar made from the schema and
        ``ChatResult.parsed`` holds the parsed value. ``cancel`` stops generation within one token
        (``finish_reason == "cancelled"``). Never raises for a cancelled call.
        """
        ...


@runtime_checkable
class Embedder(Protocol):
    """A sentence embedder. Blocking; call it on the ``embed`` executor only."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim), rows L2-normalised."""
        ...


class WordTokenCounter:
    """The evaluation yardstick: ceil(1.3 × words), as in ../shared/data/README.md."""

    name = "words"

    def count(self, text: str) -> int:
        words = len(text.split())
        return -(-words * 13 // 10)


class ModelTokenCounter:
    """Adapts a ``ChatModel``'s tokenizer to the ``TokenCounter`` port, with a bounded cache
    (the same turns are counted again in every build that recalls them)."""

    def __init__(self, model: ChatModel, *, cache_size: int = 50_000) -> None:
        self._model = model
        self.name = f"model:{model.name}"
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size

    def count(self, text: str) -> int:
        hit = self._cache.get(text)
        if hit is None:
            hit = self._model.count_tokens(text)
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[text] = hit
        return hit

    def count_chat(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the prompt the model's chat template makes of ``messages`` (not cached:
        prompts are rarely counted twice)."""
        return self._model.count_chat_tokens(messages)
