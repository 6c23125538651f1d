"""Scripted fakes of the model ports, for fast unit tests of the engine.

They honour the same contracts as the real adapters (streaming callbacks, cancellation, usage
records, L2-normalised embeddings) so a test written against a fake also runs on the real model.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.core.ports import CancelToken, ChatMessage, ChatResult, GenerationParams, TokenCallback
from app.core.types import ModelUsage

_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class ScriptedChatModel:
    """Replies with scripted texts in order (cycling), streamed word by word.

    With a ``json_schema`` the next scripted reply is returned as-is and parsed as JSON; a reply
    that does not parse leaves ``parsed`` as ``None`` (like a model that ignored the grammar).
    """

    def __init__(
        self,
        replies: Sequence[str] = ("OK.",),
        *,
        name: str = "scripted",
        context_size: int = 2048,
        token_delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self.context_size = context_size
        self._replies = list(replies) or ["OK."]
        self._next = 0
        self._delay = token_delay_s
        self.calls: list[dict[str, Any]] = []

    def count_tokens(self, text: str) -> int:
        return len(_TOKEN_RE.findall(text))

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count_tokens(m["content"]) + 4 for m in messages) + 2

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
        params = params or GenerationParams()
        self.calls.append({"messages": list(messages), "stage": stage, "json_schema": json_schema})
        start = time.perf_counter()
        prompt_tokens = self.count_chat_tokens(messages)
        if prompt_tokens >= self.context_size:  # as the real adapter: refused, reported, not raised
            error = (f"the prompt has {prompt_tokens} tokens, more than the model's context of "
                     f"{self.context_size}; lower the context budget")
            usage = ModelUsage(stage=stage, provider="fake", model=self.name, params=params.model_dump(),
                               prompt_tokens=prompt_tokens, total_tokens=prompt_tokens,
                               latency_ms=(time.perf_counter() - start) * 1000, status="error", error=error)
            return ChatResult(text="", usage=usage, finish_reason="error")
        reply = self._replies[self._next % len(self._replies)]
        self._next += 1
        first: float | None = None
        pieces: list[str] = []
        finish = "stop"
        for i, word in enumerate(reply.split(" ")):
            if cancel is not None and cancel.cancelled:
                finish = "cancelled"
                break
            if len(pieces) >= params.max_tokens:
                finish = "length"
                break
            piece = word if i == 0 else " " + word
            if self._delay:
                time.sleep(self._delay)
            if first is None:
                first = (time.perf_counter() - start) * 1000
            pieces.append(piece)
            if on_token is not None:
                on_token(piece)
        text = "".join(pieces)
        parsed = None
        if json_schema is not None and finish == "stop":
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
        usage = ModelUsage(
            stage=stage,
            provider="fake",
            model=self.name,
            params=params.model_dump(),
            prompt_tokens=prompt_tokens,
            completion_tokens=len(pieces),
            total_tokens=prompt_tokens + len(pieces),
            first_token_latency_ms=first,
            latency_ms=(time.perf_counter() - start) * 1000,
            status="cancelled" if finish == "cancelled" else "success",
        )
        return ChatResult(text=text, usage=usage, finish_reason=finish, parsed=parsed)


class HashEmbedder:
    """Deterministic bag-of-words embedding: texts sharing words get similar vectors.

    Good enough for unit tests of recall and routing logic; not a language model.
    """

    def __init__(self, dim: int = 64, *, name: str = "hash-embedder") -> None:
        self.name = name
        self.dim = dim

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for token in _TOKEN_RE.findall(text.lower()):
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vec[index] += sign
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return vec / norm

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:  # noqa: ARG002 - the port's signature
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)


class ScriptedProvider(ScriptedChatModel):
    """A scripted ``ChatProvider`` for registry tests: replies like ``ScriptedChatModel`` and can
    be told to be down (``available=False``: every call raises a transient ``ProviderError``),
    to fail the next ``fail_times`` calls before the first token, or to break after
    ``break_after`` pieces (``finish_reason == "error"``). Prices make its calls cost."""

    def __init__(self, provider_id: str, replies: Sequence[str] = ("OK.",), *, type: str = "external",
                 price_in_per_1k: float = 0.0, price_out_per_1k: float = 0.0, **kwargs: Any) -> None:
        super().__init__(replies, name=kwargs.pop("name", f"{provider_id}-model"), **kwargs)
        self.id = provider_id
        self.type = type
        self.available = True
        self.fail_times = 0
        self.transient = True
        self.break_after: int | None = None
        self.price_in_per_1k, self.price_out_per_1k = price_in_per_1k, price_out_per_1k

    def is_available(self) -> bool:
        return self.available

    def max_tokens(self) -> int:
        return self.context_size

    def estimate_cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_in_per_1k + completion_tokens * self.price_out_per_1k) / 1000

    def model_info(self) -> Any:
        from app.core.ports import ModelInfo

        return ModelInfo(provider_id=self.id, provider_name=self.id, kind="fake", type=self.type,  # type: ignore[arg-type]
                         model=self.name, context_size=self.context_size, json_schema=True,
                         price_in_per_1k=self.price_in_per_1k, price_out_per_1k=self.price_out_per_1k)

    def chat(self, messages: Sequence[ChatMessage], *, params: GenerationParams | None = None, stage: str = "answer",
             json_schema: dict[str, Any] | None = None, on_token: TokenCallback | None = None,
             cancel: CancelToken | None = None) -> ChatResult:
        from app.core.errors import ProviderError

        if not self.available:
            raise ProviderError(f"{self.id} cannot be reached (connection refused)", transient=True)
        if self.fail_times > 0:
            self.fail_times -= 1
            raise ProviderError(f"{self.id} answered HTTP 503", transient=self.transient)
        if self.break_after is None:
            result = super().chat(messages, params=params, stage=stage, json_schema=json_schema,
                                  on_token=on_token, cancel=cancel)
        else:
            broken = _Broken(self.break_after)
            try:
                super().chat(messages, params=params, stage=stage, json_schema=json_schema,
                             on_token=broken.wrap(on_token), cancel=cancel)
            except _Broken.Stop:
                pass
            usage = ModelUsage(stage=stage, provider=self.id, model=self.name, completion_tokens=len(broken.pieces),
                               status="error", error="the connection was reset")
            result = ChatResult(text="".join(broken.pieces), usage=usage, finish_reason="error")
        usage = result.usage
        result.usage = usage.model_copy(update={
            "provider": self.id, "cost": self.estimate_cost(usage.prompt_tokens, usage.completion_tokens)})
        return result


class _Broken:
    """Passes ``after`` pieces on, then stops the stream (a connection lost mid-answer)."""

    class Stop(Exception):
        pass

    def __init__(self, after: int) -> None:
        self.after = after
        self.pieces: list[str] = []

    def wrap(self, on_token: TokenCallback | None) -> TokenCallback:
        def relay(piece: str) -> None:
            if len(self.pieces) >= self.after:
                raise _Broken.Stop
            self.pieces.append(piece)
            if on_token is not None:
                on_token(piece)

        return relay
