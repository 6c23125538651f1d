"""The llama.cpp chat model: ``LlamaChatModel`` implements the ``ChatModel`` port.

Threading (DESIGN.md §3): a llama.cpp context is not thread-safe, so ``chat`` must only ever run on
the single-worker ``llm`` executor. ``count_tokens`` / ``count_chat_tokens`` are the exception: they
use a second, vocabulary-only llama.cpp instance behind a lock, so any thread (the UI's budget
meter, the compiler) may call them while a generation is running.

The prompt is made by the GGUF's own chat template (``tokenizer.chat_template``), rendered in a
worker process bounded in time and memory (``app.llm.template``: the same Jinja environment as
llama-cpp-python's ``Jinja2ChatFormatter``, but a template that loops, recurses, allocates without
end or is refused by the sandbox is a one-line ``ModelError`` naming the file, never a hang). Every
template of the file is checked there before llama.cpp loads it. A model without a template is
prompted with ChatML, a Gemma file with Gemma's turns (its system text folded into the first user
turn, as Gemma's own template does). ``count_chat_tokens`` renders the same prompt and tokenizes
it the same way as generation, so the count is exact, not an estimate.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from app.core.errors import ModelError
from app.core.ports import CancelToken, ChatMessage, ChatResult, GenerationParams, TokenCallback
from app.core.types import ModelUsage
from app.llm.formats import format_gemma_turns
from app.llm.gguf import FIX_HINT, display_path, probe_gguf, validate_gguf
from app.llm.template import DEFAULT_TEMPLATE, GEMMA_ARCHITECTURES, ChatTemplates, TemplateFormatter, template_sources

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- llama.cpp log capture

_LOG_TAIL: deque[str] = deque(maxlen=64)
_log_state: dict[str, Any] = {"callback": None, "partial": "", "echo": False}
_log_lock = threading.Lock()


def _import_llama_cpp() -> ModuleType:
    """Import llama_cpp (slow-ish, ~0.2 s) and route its C log into ``_LOG_TAIL`` and ``logging``.

    llama-cpp-python's own log callback prints some warnings to stderr even with ``verbose=False``;
    ours keeps the last lines (to explain a failed load in one line) and logs at DEBUG.
    """
    try:
        import llama_cpp
    except Exception as exc:  # ImportError, or OSError when the shared library cannot load
        raise ModelError(f"llama-cpp-python is not usable ({type(exc).__name__}: {exc}); "
                         "reinstall it with scripts/setup.sh") from None
    with _log_lock:
        if _log_state["callback"] is None:

            @llama_cpp.llama_log_callback  # type: ignore[misc]
            def _on_log(_level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
                piece = text.decode("utf-8", errors="replace")
                if _log_state["echo"]:
                    print(piece, end="", flush=True, file=sys.stderr)
                buffered = _log_state["partial"] + piece
                *lines, _log_state["partial"] = buffered.split("\n")
                for line in lines:
                    if line.strip():
                        _LOG_TAIL.append(line.strip())
                        log.debug("llama.cpp: %s", line.strip())

            llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))
            _log_state["callback"] = _on_log  # keep a reference: ctypes would free it
    return llama_cpp


def _log_reason() -> str:
    """The most telling recent llama.cpp log line (errors first), shortened for a message."""
    lines = list(_LOG_TAIL)
    for needle in ("error", "failed", "invalid", "unknown", "unsupported"):
        for line in reversed(lines):
            if needle in line.lower():
                return " ".join(line.split())[:160]
    return ""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


# --------------------------------------------------------------------------- JSON schema → grammar

_MAX_ENUM_RANGE = 256


def grammar_schema(schema: Any) -> Any:
    """Rewrite what llama-cpp-python's schema→grammar converter ignores into what it enforces.

    The converter (0.3.36) supports types, ``enum``/``const``, ``properties``/``required``/
    ``additionalProperties``, ``items``/``minItems``/``maxItems``, ``minLength``/``maxLength``,
    ``pattern``, local ``$ref`` and ``anyOf``/``oneOf``/``allOf``, but not numeric bounds. A bounded
    integer with at most 256 values becomes an ``enum``; other numeric bounds stay unenforced.
    """
    if isinstance(schema, list):
        return [grammar_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: grammar_schema(value) for key, value in schema.items()}
    if out.get("type") == "integer" and "enum" not in out:
        low = out.get("minimum")
        high = out.get("maximum")
        if isinstance(out.get("exclusiveMinimum"), (int, float)):
            low = int(out["exclusiveMinimum"]) + 1
        if isinstance(out.get("exclusiveMaximum"), (int, float)):
            high = -(-out["exclusiveMaximum"] // 1) - 1
        if isinstance(low, (int, float)) and isinstance(high, (int, float)):
            lo, hi = int(-(-low // 1)), int(high // 1)
            if 0 <= hi - lo < _MAX_ENUM_RANGE:
                for key in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                    out.pop(key, None)
                out["enum"] = list(range(lo, hi + 1))
    return out


# --------------------------------------------------------------------------- the chat model


class _CallState:
    """Per-call bookkeeping read by the stopping criterion (chat() is never re-entered)."""

    def __init__(self, cancel: CancelToken | None) -> None:
        self.cancel = cancel
        self.sampled = 0  # tokens sampled so far (including one that ends generation)
        self.last_len = -1
        self.cancelled_by_criterion = False


@dataclass
class _Reply:
    """One chat call's reply as it streams: its pieces, how it ended, and its usage record."""

    stage: str
    model: str
    params: dict[str, Any]
    started: float
    state: _CallState
    prompt_tokens: int = 0
    pieces: list[str] = field(default_factory=list)
    first_ms: float | None = None
    finish: str = "stop"
    error: str = ""

    def usage(self, status: str) -> ModelUsage:
        completion = max(0, self.state.sampled - (0 if self.finish == "length" else 1))
        return ModelUsage(
            stage=self.stage,
            provider="llama.cpp",
            model=self.model,
            params=self.params,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=completion,
            total_tokens=self.prompt_tokens + completion,
            first_token_latency_ms=self.first_ms,
            latency_ms=(time.perf_counter() - self.started) * 1000,
            status=status,  # type: ignore[arg-type]
            error=self.error,
        )

    def consume(self, stream: Any, cancel: CancelToken | None, on_token: TokenCallback | None) -> None:
        """Read the completion chunks until they end or ``cancel`` is set (a piece sampled after
        that is dropped, not shown)."""
        for chunk in stream:
            choice = chunk["choices"][0]
            piece = choice.get("delta", {}).get("content")
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
            if not piece:
                continue
            if cancel is not None and cancel.cancelled:
                self.finish = "cancelled"
                break
            if self.first_ms is None:
                self.first_ms = (time.perf_counter() - self.started) * 1000
            self.pieces.append(piece)
            if on_token is not None:
                on_token(piece)

    def result(self, wants_json: bool) -> ChatResult:
        """The finished call; with ``wants_json`` the text parsed (None when cut off or invalid)."""
        if self.state.cancelled_by_criterion:
            self.finish = "cancelled"
        text = "".join(self.pieces)
        parsed: Any = None
        if wants_json and self.finish in ("stop", "length"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
        status = {"cancelled": "cancelled", "error": "error"}.get(self.finish, "success")
        return ChatResult(text=text, usage=self.usage(status), finish_reason=self.finish, parsed=parsed)


class LlamaChatModel:
    """A GGUF chat model run by llama.cpp (``ChatModel`` port).

    Construction validates the file (``validate_gguf``; with ``probe=True`` also a load in a child
    process, ~0.4 s more), then loads it — about 0.2–0.5 s for SmolLM2-135M. Call the constructor
    and ``chat`` on the ``llm`` executor only; ``count_tokens`` and ``count_chat_tokens`` are safe
    from any thread. Raises ``ModelError`` (one line) when the file is bad or llama.cpp cannot load it.

    ``prompt_cache=True`` keeps the KV cache between calls and re-evaluates only the part of the
    prompt that differs from the previous call: prompt evaluation runs at only ~250–300 tokens/s on
    a 2-core CPU, so a shared prefix saves seconds. The price is bit-exact reproducibility: the
    same prompt, parameters and seed can sample differently depending on the previous call.
    ``prompt_cache=False`` evaluates every prompt from scratch, so a call is a pure function of its
    inputs (use it for replay and evaluation).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        context_size: int = 2048,
        n_threads: int = 2,
        seed: int = 0,
        verbose: bool = False,
        name: str | None = None,
        probe: bool = False,
        prompt_cache: bool = True,
    ) -> None:
        self.path = Path(path)
        self.prompt_cache = prompt_cache
        self.context_size = context_size
        self.n_threads = n_threads
        self.name = name or self.path.name.removesuffix(".gguf")
        self.load_seconds = 0.0
        shown = display_path(self.path)
        started = time.perf_counter()
        self.gguf_info = validate_gguf(self.path)
        # Before llama-cpp-python compiles the templates in this process (its Llama() does).
        self._templates = ChatTemplates(template_sources(self.gguf_info.metadata), shown)
        try:
            self._templates.check()
            if probe:
                probe_gguf(self.path, templates=False)
        except ModelError:
            self._templates.close()
            raise
        llama_cpp = _import_llama_cpp()
        self._llama_cpp = llama_cpp
        _log_state["echo"] = verbose
        self._count_lock = threading.Lock()
        self._count_buffer: Any = ()  # ctypes array of llama_token, grown on demand
        self._call: _CallState | None = None
        self._grammars: dict[str, Any] = {}
        try:
            # The tokenizer-only twin: loads no weights, used for counting from any thread.
            self._vocab = llama_cpp.Llama(
                model_path=str(self.path), vocab_only=True, n_ctx=64, n_batch=64, verbose=verbose
            )
            self._formatter = self._make_formatter()
            handler = llama_cpp.llama_chat_format.chat_formatter_to_chat_completion_handler(self._format)
            self._llm = llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=context_size,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                seed=seed,
                verbose=verbose,
                chat_handler=handler,
            )
        except ModelError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            reason = _log_reason() or _one_line(exc)
            raise ModelError(f"llama.cpp could not load {shown} ({reason}); {FIX_HINT}") from None
        self.load_seconds = time.perf_counter() - started

    # ----------------------------------------------------------------- prompt formatting

    def _make_formatter(self) -> Any:
        """The GGUF's chat template as a formatter (rendered by the bounded worker, with what
        llama-cpp-python's ``Jinja2ChatFormatter`` would return), else ChatML."""
        fmt = self._llama_cpp.llama_chat_format
        has_template = DEFAULT_TEMPLATE in self._templates
        self.chat_template_source = "gguf" if has_template else "chatml (no template in the file)"
        if not has_template:
            architecture = str(self.gguf_info.metadata.get("general.architecture", ""))
            if architecture in GEMMA_ARCHITECTURES:  # Gemma's turns, as llama.cpp's built-in template writes them
                self.chat_template_source = f"gemma (no template in the file; by its architecture {architecture})"
                return format_gemma_turns(fmt)
            return fmt.format_chatml
        eos_id, bos_id = self._vocab.token_eos(), self._vocab.token_bos()
        self._templates.eos_token = self._vocab._model.token_get_text(eos_id) if eos_id != -1 else ""
        self._templates.bos_token = self._vocab._model.token_get_text(bos_id) if bos_id != -1 else ""
        return TemplateFormatter(self._templates, self._llama_cpp, eos_id)

    def _format(self, *, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        """The formatter handed to llama-cpp-python: adds our per-token stopping criterion."""
        llama_cpp = self._llama_cpp
        result = self._formatter(messages=list(messages), **kwargs)
        criteria = llama_cpp.StoppingCriteriaList(list(result.stopping_criteria or []))
        criteria.append(self._on_sampled)
        return llama_cpp.llama_chat_format.ChatFormatterResponse(
            prompt=result.prompt,
            stop=result.stop,
            stopping_criteria=criteria,
            added_special=result.added_special,
        )

    def _on_sampled(self, input_ids: Any, _logits: Any) -> bool:
        """Called by llama.cpp after each sampled token: counts it, and stops on cancel."""
        state = self._call
        if state is None:
            return False
        n = len(input_ids)
        if n == state.last_len:  # the final re-check after generation ended: not a new token
            return False
        state.last_len = n
        state.sampled += 1
        if state.cancel is not None and state.cancel.cancelled:
            state.cancelled_by_criterion = True
            return True
        return False

    # ----------------------------------------------------------------- token counting (any thread)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's tokenizer, no BOS and no special-token parsing."""
        if not text:
            return 0
        data = text.encode("utf-8")
        with self._count_lock:
            # One pass into a reused buffer: ``Llama.tokenize`` sizes its buffer by the training
            # context (zero for a vocab-only load, so it tokenizes twice) and builds a list.
            if len(self._count_buffer) < len(data) + 8:  # a token holds a byte at least
                self._count_buffer = (self._llama_cpp.llama_token * (len(data) + 8))()
            n = self._llama_cpp.llama_tokenize(self._vocab._model.vocab, data, len(data), self._count_buffer,
                                               len(self._count_buffer), False, False)
            return n if n >= 0 else len(self._vocab.tokenize(data, add_bos=False, special=False))

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the exact prompt ``chat`` would feed the model for ``messages``
        (chat template applied, generation prompt added, special tokens parsed)."""
        with self._count_lock:
            try:
                result = self._formatter(messages=list(messages))
            except ModelError:  # the bounded renderer's own line (names the file and the reason)
                raise
            except Exception as exc:  # the template may reject e.g. non-alternating roles
                raise ModelError(f"the chat template of {display_path(self.path)} rejected the messages "
                                 f"({_one_line(exc)})") from None
            ids = self._vocab.tokenize(
                result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
            )
            return len(ids)

    # ----------------------------------------------------------------- generation (llm executor)

    def _grammar(self, schema: dict[str, Any]) -> Any:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            try:
                self._grammars[key] = self._llama_cpp.LlamaGrammar.from_json_schema(
                    json.dumps(grammar_schema(schema)), verbose=False
                )
            except Exception as exc:
                raise ModelError(f"the JSON schema cannot be turned into a grammar ({_one_line(exc)}); "
                                 "simplify the schema") from None
        return self._grammars[key]

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
        """Stream a reply (see ``ChatModel.chat``). Run on the ``llm`` executor only.

        ``on_token`` gets each text piece; their concatenation is ``ChatResult.text``. ``cancel``
        is checked after every sampled token, so generation stops within one token
        (``finish_reason == "cancelled"``). With ``json_schema`` sampling is constrained by a
        grammar made from the schema (see ``grammar_schema`` for what is enforced) and ``parsed`` holds the parsed JSON (``None`` if the reply
        was cut off). A failure during generation (e.g. a prompt longer than the context) returns
        ``finish_reason == "error"`` with ``usage.status == "error"`` and ``usage.error`` set (as
        does a chat template that rejects the messages);
        a schema that cannot become a grammar raises ``ModelError``.
        """
        params = params or GenerationParams()
        started = time.perf_counter()
        grammar = self._grammar(json_schema) if json_schema is not None else None
        usage_params = params.model_dump()
        usage_params["context_size"] = self.context_size
        if json_schema is not None:
            usage_params["json_schema"] = True
        reply = _Reply(stage=stage, model=self.name, params=usage_params, started=started, state=_CallState(cancel))
        refused = self._refuse(messages, reply, cancel)
        if refused is not None:
            return refused
        self._call = reply.state
        stream: Any = None
        try:
            if not self.prompt_cache:
                self._llm.reset()  # evaluate the whole prompt: same inputs, same output
            stream = self._llm.create_chat_completion(
                messages=list(messages),  # type: ignore[arg-type]
                stream=True,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k,
                repeat_penalty=params.repeat_penalty,
                seed=params.seed,
                stop=list(params.stop),
                grammar=grammar,
            )
            reply.consume(stream, cancel, on_token)
        except Exception as exc:
            reply.finish = "error"
            reply.error = _log_reason() or _one_line(exc)
            log.warning("chat generation failed: %s", reply.error)
        finally:
            if stream is not None and hasattr(stream, "close"):
                stream.close()
            self._call = None
        return reply.result(json_schema is not None)

    def _refuse(self, messages: Sequence[ChatMessage], reply: _Reply, cancel: CancelToken | None) -> ChatResult | None:
        """Count the prompt into ``reply``; the result of a call that cannot start (a template
        that rejects the messages, cancelled already, a prompt longer than the context), else None."""
        try:
            reply.prompt_tokens = self.count_chat_tokens(messages)
        except ModelError as exc:
            reply.finish, reply.error = "error", str(exc)
            return ChatResult(text="", usage=reply.usage("error"), finish_reason="error")
        if cancel is not None and cancel.cancelled:
            return ChatResult(text="", usage=reply.usage("cancelled"), finish_reason="cancelled")
        if reply.prompt_tokens >= self.context_size:
            reply.finish = "error"
            reply.error = (f"the prompt has {reply.prompt_tokens} tokens, more than the model's context of "
                           f"{self.context_size}; lower the context budget")
            return ChatResult(text="", usage=reply.usage("error"), finish_reason="error")
        return None

    @contextlib.contextmanager
    def suspend(self) -> Iterator[None]:
        """Set the generation in progress aside while another ``chat`` runs on this thread.

        Used by ``app.core.runtime.executors.UrgentLane`` to let an interruption cut in between
        two tokens of a long generation: the llama.cpp state (KV cache of the cells in use and
        the last logits — about 1 MB for a 600-token SmolLM2-135M prompt, copied in ~2 ms), the
        evaluated tokens, the sampler chain (repeat-penalty history, grammar) and this adapter's
        per-call state are copied out, and put back on exit, so the suspended generation goes on
        exactly as if nothing had run (checked token for token in
        tests/engine/test_scheduler.py). The price is the re-evaluation of the inner call's prompt
        (no shared cache) and the copies.
        Run on the ``llm`` executor only, from inside a ``chat`` token callback.
        """
        llm, lib = self._llm, self._llama_cpp
        ctx = llm._ctx.ctx
        size = int(lib.llama_state_get_size(ctx))
        buffer = (ctypes.c_uint8 * size)()
        used = int(lib.llama_state_get_data(ctx, buffer, size))
        saved = (llm.input_ids.copy(), llm.n_tokens, llm._sampler, llm._seed, self._call)
        llm._sampler = None
        try:
            yield
        finally:
            if int(lib.llama_state_set_data(ctx, buffer, used)) != used:
                raise ModelError("llama.cpp could not restore a suspended generation")
            input_ids, llm.n_tokens, llm._sampler, seed, self._call = saved
            llm.input_ids[:] = input_ids
            llm.set_seed(seed)
            llm._requires_eval = True  # a later prompt-cache hit re-evaluates one token

    def close(self) -> None:
        """Free both llama.cpp instances and end the template worker (the object is unusable
        afterwards)."""
        for attr in ("_llm", "_vocab"):
            model = getattr(self, attr, None)
            if model is not None:
                model.close()
        templates = getattr(self, "_templates", None)
        if templates is not None:
            templates.close()

    def __repr__(self) -> str:
        return f"LlamaChatModel({self.name!r}, context_size={self.context_size})"
