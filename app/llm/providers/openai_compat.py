"""A chat provider over any OpenAI-compatible HTTP endpoint, through the official ``openai`` client.

Works with llama-server, llama-cpp-python's server, vLLM, LM Studio, hosted APIs, and Ollama,
which serves the same API under ``/v1`` (``kind == "ollama"``: the same client, with Ollama's
default endpoint and no key) — so no second client library is needed for it.

Streaming uses ``client.chat.completions.create(stream=True, stream_options={"include_usage":
True})``: each chunk's ``choices[0].delta.content`` is a piece; the last chunk carries the token
usage when the server reports it (llama-cpp-python's server does not: prompt tokens are then
counted by the counter handed in — the local model's tokenizer — and completion tokens are the
pieces received; ``params["usage"]`` says which). JSON-schema output is asked for in the
standard ``response_format={"type": "json_schema", ...}``, or ``{"type": "json_object",
"schema": ...}`` for servers that only know that (``json_schema_style``).

The client's own retries are off (``max_retries=0``): the provider registry retries with backoff
and falls back, and must see each failure. Every call has deadlines the server cannot stretch (the
client's read timeout alone restarts with every byte, so keep-alive comments or a stream without a
finish reason would never end): a token within ``timeout_s`` of the start and of the token before
(connect and first token; a stall), and the whole call within ``timeout_s`` plus the answer cap at
``min_tokens_per_s``. The request runs on a worker thread that hands chunks over, and the caller
stops waiting at a deadline. The app's own answer cap (``max_tokens`` of the request) is enforced
on the stream as received, not left to the server. The API key is read from the named environment
variable for each client; it is never stored, and an unnamed key is sent as a placeholder
(never ``$OPENAI_API_KEY``, which the client would otherwise pick up and send to any endpoint).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from app.core.errors import ProviderError
from app.core.ports import CancelToken, ChatMessage, ChatResult, GenerationParams, ModelInfo, TokenCallback
from app.core.types import ModelUsage
from app.llm.providers.settings import ProviderConfig

_TRANSIENT_STATUS = {408, 409, 425, 429}
_FINISH = {"stop": "stop", "length": "length"}


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def classify(exc: BaseException, config: ProviderConfig) -> ProviderError:
    """The one-line ``ProviderError`` for an exception of the ``openai`` client (transient or not)."""
    import openai

    where = f"{config.label} ({config.base_url})"
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(f"{where} did not answer within {config.timeout_s:g} s", transient=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return ProviderError(f"{where} cannot be reached ({_line(cause)})", transient=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in (401, 403):
            env = f"${config.api_key_env}" if config.api_key_env else "no key (set api_key_env)"
            return ProviderError(f"{where} refused the API key ({status}; key from {env})")
        if status == 404:
            return ProviderError(f"{where} does not serve the model {config.model!r} (404)")
        return ProviderError(f"{where} answered HTTP {status}: {_line(exc)}",
                             transient=status in _TRANSIENT_STATUS or status >= 500)
    return ProviderError(f"{where} failed: {_line(exc)}")


class OpenAICompatibleProvider:
    """``ChatProvider`` over an OpenAI-compatible endpoint (see the module doc). Blocking."""

    type = "external"

    def __init__(self, config: ProviderConfig, *, counter: Callable[[str], int] | None = None) -> None:
        self.config = config
        self.id = config.id
        self.name = config.label
        self.context_size = config.context_size
        self._counter = counter
        self._client: Any = None

    # ----------------------------------------------------------------- the client

    def client(self) -> Any:
        """The ``openai.OpenAI`` client (made on first use; the import costs ~0.3 s)."""
        if self._client is None:
            import openai

            self._client = openai.OpenAI(
                base_url=self.config.base_url, api_key=self.config.api_key() or "not-needed",
                max_retries=0, timeout=self.config.timeout_s,
            )
        return self._client

    # ----------------------------------------------------------------- ChatProvider

    def is_available(self) -> bool:
        """Whether the endpoint lists its models within 3 s."""
        try:
            self.client().with_options(timeout=3.0).models.list()
        except Exception:  # noqa: BLE001 - any failure means "not now"
            return False
        return True

    def max_tokens(self) -> int:
        return self.config.context_size

    def estimate_cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.config.price_in_per_1k + completion_tokens * self.config.price_out_per_1k) / 1000

    def model_info(self) -> ModelInfo:
        c = self.config
        return ModelInfo(provider_id=c.id, provider_name=c.label, kind=c.kind, type="external", model=c.model,
                         context_size=c.context_size, endpoint=c.base_url, off_machine=c.off_machine,
                         json_schema=c.json_schema_style != "none", price_in_per_1k=c.price_in_per_1k,
                         price_out_per_1k=c.price_out_per_1k)

    def count_tokens(self, text: str) -> int:
        """The counter handed in (the local tokenizer), else ~4 characters a token."""
        if self._counter is not None:
            return self._counter(text)
        return -(-len(text) // 4)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count_tokens(m.get("content", "")) + 4 for m in messages) + 2

    def _request(self, messages: Sequence[ChatMessage], params: GenerationParams,
                 json_schema: dict[str, Any] | None) -> dict[str, Any]:
        c = self.config
        request: dict[str, Any] = {
            "model": c.model, "messages": list(messages), "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": min(params.max_tokens, c.max_tokens or params.max_tokens),
            "temperature": params.temperature if c.temperature is None else c.temperature,
            "top_p": params.top_p, "seed": params.seed,
        }
        if params.stop:
            request["stop"] = list(params.stop)
        if json_schema is not None and c.json_schema_style == "json_schema":
            request["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "reply", "schema": json_schema, "strict": True}}
        elif json_schema is not None and c.json_schema_style == "json_object":
            request["response_format"] = {"type": "json_object", "schema": json_schema}
        return request

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
        """Stream a reply from the endpoint (``ChatProvider.chat``): raises ``ProviderError`` when
        the request fails before the first piece, returns ``finish_reason == "error"`` with the
        pieces so far when the stream breaks after it. ``cancel`` is checked at every chunk."""
        params = params or GenerationParams()
        call = _Call(self, stage, params, json_schema is not None)
        if cancel is not None and cancel.cancelled:
            return call.result("cancelled", messages)
        request = self._request(messages, params, json_schema)
        stream = _Stream(self.client(), request, self.config)
        try:
            call.consume(stream, request["max_tokens"], on_token, cancel)
            if not call.ended and call.finish != "cancelled":  # the connection closed before the end
                raise ConnectionError("the stream ended before the model finished")
        except Exception as exc:  # noqa: BLE001 - before the first piece: the registry may fall back
            error = exc if isinstance(exc, _Late) else classify(exc, self.config)
            if not call.pieces:
                raise error from None
            call.error = str(error)
            call.finish = "error"
        finally:
            stream.close()
            call.flush(on_token)
        return call.result(call.finish, messages)


class _Redact:
    """Takes the API key out of a streamed answer: an endpoint that repeats the key it was sent
    does not get it shown, stored or exported (``[API key]`` instead). Holds back the end of the
    text that may be the start of the key, until the next piece tells."""

    MARK = "[API key]"

    def __init__(self, key: str) -> None:
        self.key = key if len(key) >= 8 else ""  # a placeholder or no key: nothing to hide
        self.held = ""

    def feed(self, piece: str) -> str:
        if not self.key:
            return piece
        text = (self.held + piece).replace(self.key, self.MARK)
        keep = next((n for n in range(min(len(self.key) - 1, len(text)), 0, -1) if self.key.startswith(text[-n:])), 0)
        self.held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held


class _Late(ProviderError):
    """The call passed a deadline (not transient: a retry would wait as long again)."""

    def __init__(self, config: ProviderConfig, what: str) -> None:
        super().__init__(f"{config.label} ({config.base_url}) {what}")


class _Stream:
    """One request's chunks, read on a worker thread and handed over until a deadline (module
    doc): ``next_chunk`` raises ``_Late`` when one passes, whatever the server keeps sending."""

    _END = object()

    def __init__(self, client: Any, request: dict[str, Any], config: ProviderConfig) -> None:
        self.config = config
        started = time.monotonic()
        self.total_s = config.timeout_s + request["max_tokens"] / config.min_tokens_per_s
        self.deadline = started + self.total_s
        self.stall_at = started + config.timeout_s  # the next token is due by then
        self._chunks: queue.Queue[tuple[str, Any]] = queue.Queue()  # unbounded: the worker never waits on the caller
        self._stop = threading.Event()
        self._stream: Any = None
        threading.Thread(target=self._pump, args=(client.with_options(timeout=config.timeout_s), request),
                         name="provider stream", daemon=True).start()

    def progress(self) -> None:
        """A token came: the next one is due ``timeout_s`` from now."""
        self.stall_at = time.monotonic() + self.config.timeout_s

    def _pump(self, client: Any, request: dict[str, Any]) -> None:
        try:
            self._stream = client.chat.completions.create(**request)
            for chunk in self._stream:
                if self._stop.is_set():
                    break
                self._chunks.put(("chunk", chunk))
            self._chunks.put(("end", self._END))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who classifies it
            self._chunks.put(("raise", exc))
        finally:
            self.close()

    def next_chunk(self, cancel: CancelToken | None) -> Any:
        """The next chunk, ``_END`` at the end of the stream, ``None`` when ``cancel`` is set."""
        while True:
            now = time.monotonic()
            if now >= self.deadline:
                raise _Late(self.config, f"did not finish within {self.total_s:g} s")
            wait = 0.0 if now >= self.stall_at else min(self.deadline, self.stall_at, now + 0.2) - now
            try:
                kind, value = self._chunks.get(timeout=wait) if wait > 0 else self._chunks.get_nowait()
            except queue.Empty:
                if now >= self.stall_at:
                    raise _Late(self.config, f"sent no token for {self.config.timeout_s:g} s") from None
                if cancel is not None and cancel.cancelled:
                    return None
                continue
            if kind == "raise":
                raise value
            return value

    def close(self) -> None:
        """Stop reading (the worker ends at its next chunk; the response is closed)."""
        self._stop.set()
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - closing from the other thread may race the reader
                pass


class _Call:
    """One streamed request's pieces, timing and reported usage."""

    def __init__(self, provider: OpenAICompatibleProvider, stage: str, params: GenerationParams, wants_json: bool) -> None:
        self.provider, self.stage, self.params, self.wants_json = provider, stage, params, wants_json
        self.started = time.perf_counter()
        self.pieces: list[str] = []  # as received (the answer cap counts them)
        self.shown: list[str] = []  # as handed on: with the API key taken out (``_Redact``)
        self._redact = _Redact(provider.config.api_key())
        self.first_ms: float | None = None
        self.finish = "stop"
        self.ended = False  # a chunk said why the model stopped (a finish reason)
        self.error = ""
        self.reported: Any = None

    def consume(self, stream: _Stream, cap: int, on_token: TokenCallback | None, cancel: CancelToken | None) -> None:
        """Take chunks until the model finishes, ``cancel`` is set, or ``cap`` pieces (the app's
        answer cap: a piece is a token of the stream) were received."""
        while True:
            try:
                chunk = stream.next_chunk(cancel)
            except _Late:
                if self.ended:  # finished; only the end of the stream (or its usage) is late
                    return
                raise
            if chunk is _Stream._END:
                return
            if chunk is None or (cancel is not None and cancel.cancelled):
                self.finish = "cancelled"
                return
            if getattr(chunk, "usage", None) is not None:
                self.reported = chunk.usage
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            if choice.finish_reason:
                self.finish = _FINISH.get(choice.finish_reason, "stop")
                self.ended = True
            piece = choice.delta.content if choice.delta is not None else None
            if piece:
                stream.progress()
                self._take(piece, on_token)
            if len(self.pieces) >= cap and not self.ended:
                self.finish, self.ended = "length", True
                return

    def _take(self, piece: str, on_token: TokenCallback | None) -> None:
        if self.first_ms is None:
            self.first_ms = (time.perf_counter() - self.started) * 1000
        self.pieces.append(piece)
        self._show(self._redact.feed(piece), on_token)

    def _show(self, text: str, on_token: TokenCallback | None) -> None:
        if text:
            self.shown.append(text)
            if on_token is not None:
                on_token(text)

    def flush(self, on_token: TokenCallback | None) -> None:
        """Hand on what the key check still holds (the stream has ended)."""
        self._show(self._redact.flush(), on_token)

    def result(self, finish: str, messages: Sequence[ChatMessage]) -> ChatResult:
        """The call's result (its text as handed on: without the API key)."""
        provider, config = self.provider, self.provider.config
        text = "".join(self.shown)
        if self.reported is not None:
            prompt, completion, source = int(self.reported.prompt_tokens), int(self.reported.completion_tokens), "reported"
        else:
            prompt, completion, source = provider.count_chat_tokens(messages), len(self.pieces), "estimated"
        parsed: Any = None
        if self.wants_json and finish in ("stop", "length"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
        status = {"cancelled": "cancelled", "error": "error"}.get(finish, "success")
        usage = ModelUsage(
            stage=self.stage, provider=config.id, model=config.model,
            params={**self.params.model_dump(), "endpoint": config.base_url, "usage": source,
                    **({"json_schema": config.json_schema_style} if self.wants_json else {})},
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
            first_token_latency_ms=self.first_ms, latency_ms=(time.perf_counter() - self.started) * 1000,
            status=status, error=self.error, cost=provider.estimate_cost(prompt, completion),  # type: ignore[arg-type]
            off_machine=config.off_machine,
        )
        return ChatResult(text=text, usage=usage, finish_reason=finish, parsed=parsed)
