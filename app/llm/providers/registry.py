"""The provider registry: one ``ChatModel`` over an ordered list of ``ChatProvider``s.

The engine is handed the registry as its chat model and does not know it is there. Each call:

1. goes through the providers in order (the call's ``params.provider`` first — a session's own
   choice —, then the default, then by priority; the in-process model last), skipping one that is disabled for sending prompts off the machine without
   consent, one that failed less than ``down_for_s`` ago, one whose endpoint does not answer an
   availability check (made when it was not used for ``check_every_s``), and a priced one when
   the call's estimated cost would pass a daily or monthly spending limit;
2. retries a transient error (refused connection, timeout, HTTP 429/5xx) ``retries`` times with
   exponential backoff, then falls back to the next provider — only before the first token, so
   nothing the user saw is ever produced twice;
3. when a provider fails after the first token, stops that answer with a clear error
   (``finish_reason == "error"``) and marks the provider down: the next request goes to the next.

Every result's ``usage`` names the provider that answered, its cost and, in ``notes``, what was
skipped or retried on the way; its latencies count from the start of the call (a fallback's
wait included). Token counting (the budget, the prompt fit) is the in-process model's: a prompt
is always sized so that the last resort can answer it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from app.core.errors import ProviderError
from app.core.ports import CancelToken, ChatMessage, ChatProvider, ChatResult, GenerationParams, TokenCallback
from app.core.types import ModelUsage
from app.llm.providers.settings import ProviderConfig, ProviderSettings

log = logging.getLogger(__name__)


def day_and_month(at: datetime | None = None) -> tuple[str, str]:
    """The UTC starts of today and of this month as ISO strings (as ``ModelUsage.at`` is written)."""
    now = at or datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT00:00:00.000000Z"), now.strftime("%Y-%m-01T00:00:00.000000Z")


class Spending:
    """What priced providers cost today and this month (UTC), by provider; thread-safe.

    Starts from the store's record (``seed``), then adds each call as it finishes, so calls not
    yet written (an answer still streaming in another session) count too.
    """

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._lock = threading.Lock()
        self._day = self._month = ""
        self._today: dict[str, float] = {}
        self._this_month: dict[str, float] = {}

    def _roll(self) -> None:
        day, month = day_and_month(self._clock())
        if month != self._month:
            self._month, self._this_month = month, {}
        if day != self._day:
            self._day, self._today = day, {}

    def seed(self, today: Mapping[str, float], this_month: Mapping[str, float]) -> None:
        with self._lock:
            self._roll()
            self._today, self._this_month = dict(today), dict(this_month)

    def add(self, provider_id: str, cost: float) -> None:
        if cost <= 0:
            return
        with self._lock:
            self._roll()
            self._today[provider_id] = self._today.get(provider_id, 0.0) + cost
            self._this_month[provider_id] = self._this_month.get(provider_id, 0.0) + cost

    def totals(self, provider_id: str | None = None) -> tuple[float, float]:
        """(today, this month): of one provider, or of all together."""
        with self._lock:
            self._roll()
            if provider_id is None:
                return sum(self._today.values()), sum(self._this_month.values())
            return self._today.get(provider_id, 0.0), self._this_month.get(provider_id, 0.0)


@dataclass
class _Entry:
    provider: ChatProvider
    config: ProviderConfig
    down_until: float = 0.0
    checked_at: float = float("-inf")  # when it last answered or passed a check


class ProviderRegistry:
    """``ChatModel`` that answers through the first provider able to (module doc). Call ``chat``
    on the ``llm`` executor only, like any chat model."""

    def __init__(self, providers: Sequence[tuple[ChatProvider, ProviderConfig]], settings: ProviderSettings, *,
                 counter: ChatProvider | None = None, spending: Spending | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        if not providers:
            raise ValueError("a provider registry needs at least one provider")
        self._entries = [_Entry(provider, config) for provider, config in providers]
        self.settings = settings
        self.spending = spending or Spending()
        self._counting = counter or next((p for p, _ in providers if p.type == "local"), providers[0][0])
        self.name = self._entries[0].provider.model_info().model or self._counting.name
        self.context_size = self._counting.context_size
        self._sleep, self._clock = sleep, clock
        self._active: ChatProvider | None = None
        self._busy: set[str] = set()  # providers with a call open on this thread (a cut-in is nested)
        self.reloader: Callable[[], Any] | None = None  # set by build_registry: re-reads the settings file

    def reload(self) -> bool:
        """Re-read the provider settings this registry was built from (after ``add_provider`` and
        friends); False when it was not built from a settings file."""
        if self.reloader is None:
            return False
        self.reloader()
        return True

    def replace(self, providers: Sequence[tuple[ChatProvider, ProviderConfig]], settings: ProviderSettings) -> None:
        """Use these providers and settings from the next call on (settings changed while the
        app runs); spending and token counting stay. A provider kept (same id) keeps its state."""
        if not providers:
            raise ValueError("a provider registry needs at least one provider")
        old = {e.config.id: e for e in self._entries}
        entries = []
        for provider, config in providers:
            entry = _Entry(provider, config)
            if config.id in old and old[config.id].config == config:
                entry.down_until, entry.checked_at = old[config.id].down_until, old[config.id].checked_at
            entries.append(entry)
        self._entries, self.settings = entries, settings

    @property
    def providers(self) -> list[ChatProvider]:
        return [e.provider for e in self._entries]

    def get(self, provider_id: str) -> ChatProvider | None:
        return next((e.provider for e in self._entries if e.provider.id == provider_id), None)

    # ----------------------------------------------------------------- counting: the local model's

    def count_tokens(self, text: str) -> int:
        return self._counting.count_tokens(text)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self._counting.count_chat_tokens(messages)

    # ----------------------------------------------------------------- choosing a provider

    def _over_limit(self, entry: _Entry, estimate: float) -> str:
        """Why a call costing ``estimate`` would pass a spending limit ("" when it would not)."""
        if estimate <= 0:
            return ""
        s, c = self.settings, entry.config
        checks = ((self.spending.totals(), s.daily_limit, s.monthly_limit, "external providers"),
                  (self.spending.totals(c.id), c.daily_limit, c.monthly_limit, c.label))
        for (today, month), daily, monthly, whom in checks:
            for spent, limit, period in ((today, daily, "daily"), (month, monthly, "monthly")):
                if limit is not None and spent + estimate > limit:
                    return (f"the {period} spending limit of {limit:.4f} for {whom} is reached "
                            f"({spent:.4f} spent, this call ~{estimate:.4f})")
        return ""

    def _skip_reason(self, entry: _Entry, messages: Sequence[ChatMessage], params: GenerationParams) -> str:
        """Why ``entry`` is not asked for this call ("" when it is)."""
        config, provider = entry.config, entry.provider
        if provider.type != "local" and config.id in self._busy:  # a cut-in: one slot may be all it has
            return f"{config.label} is streaming another answer"
        if config.off_machine and not config.off_machine_confirmed:
            return f"{config.label} is off the machine and was not confirmed (pcm providers add --yes-send-off-machine)"
        now = self._clock()
        if now < entry.down_until:
            return f"{config.label} failed {self.settings.down_for_s - (entry.down_until - now):.0f} s ago"
        if provider.estimate_cost(1000, 1000) > 0:  # priced: would this call pass a limit?
            estimate = provider.estimate_cost(self.count_chat_tokens(messages), params.max_tokens)
            reason = self._over_limit(entry, estimate)
            if reason:
                return reason
        if provider.type != "local" and now - entry.checked_at > self.settings.check_every_s:
            if not provider.is_available():
                entry.down_until = now + self.settings.down_for_s
                return f"{config.label} is not reachable at {config.base_url}"
            entry.checked_at = now
        return ""

    # ----------------------------------------------------------------- chat

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
        """Answer through the first provider that can (module doc); never raises a provider's
        failure: when none can answer, the result is ``finish_reason == "error"`` saying why."""
        params = params or GenerationParams()
        started = time.perf_counter()
        notes: list[str] = []
        entries = self._entries  # a replace() meanwhile applies from the next call
        if params.provider:  # the session's own choice is asked first; the others stay the fallback
            entries = sorted(entries, key=lambda e: e.config.id != params.provider)
        for index, entry in enumerate(entries):
            if cancel is not None and cancel.cancelled:
                break
            skip = self._skip_reason(entry, messages, params)
            if skip:
                notes.append(f"skipped {entry.config.id}: {skip}")
                continue
            waited = (time.perf_counter() - started) * 1000
            try:
                result = self._with_retries(entry, notes, messages, params, stage, json_schema, on_token, cancel)
            except ProviderError as exc:
                entry.down_until = self._clock() + self.settings.down_for_s
                notes.append(f"{entry.config.id} failed: {exc}")
                log.info("provider %s failed before answering: %s", entry.config.id, exc)
                continue
            entry.checked_at = self._clock()
            if result.finish_reason == "error" and result.text:
                self._failed_mid_answer(entries, index, result)
            return self._finished(entry, result, notes, waited)
        return self._none_answered(stage, notes, started, cancel)

    def _with_retries(self, entry: _Entry, notes: list[str], messages: Sequence[ChatMessage],
                      params: GenerationParams, stage: str, json_schema: dict[str, Any] | None,
                      on_token: TokenCallback | None, cancel: CancelToken | None) -> ChatResult:
        """One provider's answer, retrying a transient error before the first token with backoff."""
        attempt = 0
        while True:
            previous, self._active = self._active, entry.provider
            self._busy.add(entry.config.id)
            try:
                return entry.provider.chat(messages, params=params, stage=stage, json_schema=json_schema,
                                           on_token=on_token, cancel=cancel)
            except ProviderError as exc:
                if not exc.transient or attempt >= self.settings.retries or (cancel is not None and cancel.cancelled):
                    raise
                wait = self.settings.backoff_s * (2 ** attempt)
                attempt += 1
                notes.append(f"retried {entry.config.id} after {wait:.2f} s: {exc}")
                self._sleep(wait)
            finally:
                self._active = previous
                self._busy.discard(entry.config.id)

    def _failed_mid_answer(self, entries: list[_Entry], index: int, result: ChatResult) -> None:
        entry = entries[index]
        entry.down_until = self._clock() + self.settings.down_for_s
        following = next((e.config.label for e in entries[index + 1:]), None)
        then = f"; the next request goes to {following}" if following else ""
        reason = result.usage.error or "the stream broke"
        result.usage.error = f"{entry.config.label} failed mid-answer, the answer stops here ({reason}){then}"

    def _finished(self, entry: _Entry, result: ChatResult, notes: list[str], waited_ms: float) -> ChatResult:
        """``result`` with the registry's notes, latencies from the call's start, and its cost booked."""
        usage = result.usage
        update: dict[str, Any] = {"notes": [*usage.notes, *notes], "provider": entry.config.id,
                                  "off_machine": entry.config.off_machine,
                                  "latency_ms": usage.latency_ms + waited_ms}
        if usage.first_token_latency_ms is not None:
            update["first_token_latency_ms"] = usage.first_token_latency_ms + waited_ms
        if waited_ms >= 1 and notes:
            update["params"] = {**usage.params, "fallback_wait_ms": round(waited_ms, 1)}
        result.usage = usage.model_copy(update=update)
        self.spending.add(entry.config.id, result.usage.cost)
        return result

    def _none_answered(self, stage: str, notes: list[str], started: float, cancel: CancelToken | None) -> ChatResult:
        cancelled = cancel is not None and cancel.cancelled
        error = "" if cancelled else "no provider could answer: " + "; ".join(notes)
        usage = ModelUsage(stage=stage, provider="none", model="", latency_ms=(time.perf_counter() - started) * 1000,
                           status="cancelled" if cancelled else "error", error=error, notes=notes)
        return ChatResult(text="", usage=usage, finish_reason="cancelled" if cancelled else "error")

    # ----------------------------------------------------------------- cutting in, closing

    @contextlib.contextmanager
    def suspend(self) -> Iterator[None]:
        """Set the running generation aside (the active provider's ``suspend``, if it has one)
        while an urgent call runs on this thread (``app.core.runtime.executors.UrgentLane``)."""
        active = self._active
        inner = getattr(active, "suspend", None)
        self._active = None
        try:
            with inner() if callable(inner) else contextlib.nullcontext():
                yield
        finally:
            self._active = active

    def close(self) -> None:
        for entry in self._entries:
            close = getattr(entry.provider, "close", None)
            if callable(close):
                close()
