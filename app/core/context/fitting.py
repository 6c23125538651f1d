"""Fitting the prompt into the model's context: the compiled context, the input and the template.

``PromptFitter.fit`` compiles the context and makes the prompt (system = the context, user = the
input). It charges the input against the context budget (``app.core.context.input_fit``): an
input that fits leaves the build exactly as the budget alone makes it; else the context gives
way to its floor, and an input still too long is shortened to what remains, with a note in the
context that says so and cites the stored input (the full text) with the kept spans as selector.
When the counter can count a whole chat prompt (the model's own template) a prompt near the
limit is counted exactly and tightened until it fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.context.compiler import CompiledContext, Conflict, ContextCompiler, Item
from app.core.context.input_fit import (
    DEFAULT_SHORTEN,
    InputCharge,
    Room,
    Shortened,
    ShortenPolicy,
    charge_input,
    shorten,
)
from app.core.errors import ModelError
from app.core.ports import ChatMessage, ChatTokenCounter, TokenCounter
from app.core.types import BlockType, Priority

#: The template's tokens when the counter cannot render the chat template (a declared estimate:
#: role markers and separators of a system and a user message and the answer cue).
TEMPLATE_ESTIMATE = 16
#: A prompt estimated within this many tokens of the limit is counted exactly (when it can be):
#: tokenizers merge across the joins of template and contents, a few tokens either way.
EXACT_MARGIN = 16
_PASSES = 5
_PROBE = "Hello"


def messages(system: str, user: str) -> list[ChatMessage]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def note_text(kept_tokens: int, tokens: int, related: int) -> str:
    """The line of the context that says the input was shortened, and how."""
    also = f", and the {related} sentences most related to the rest" if related else ""
    return (f"Note: the user's message was too long for the model and was shortened: it keeps "
            f"{kept_tokens} of its {tokens} tokens (its start, its end{also}); "
            f"each [… N words cut …] marks a cut.")


def note_item(cut: Shortened, input_id: str) -> Item:
    """The note as a ``must`` instruction line, citing the stored input with the kept spans."""
    return Item("input:shortened", BlockType.INSTRUCTION, note_text(cut.kept_tokens, cut.tokens, len(cut.related)),
                Priority.MUST, order=1, evidence_ids=(input_id,), selector=cut.selector())


@dataclass
class Fitted:
    compiled: CompiledContext
    prompt: list[ChatMessage]
    charge: InputCharge


@dataclass
class _Attempt:
    """One state of the fitting: the context budget and the input as it would be sent."""

    budget: int
    cut: Shortened | None = None


class PromptFitter:
    """Compiles the context and fits it, the input and the template into ``limit`` tokens."""

    def __init__(self, compiler: ContextCompiler, counter: TokenCounter, *, floor_share: float = 0.25,
                 policy: ShortenPolicy = DEFAULT_SHORTEN) -> None:
        self.compiler = compiler
        self.counter = counter
        self.floor_share = floor_share
        self.policy = policy
        self._template: int | None = None

    def template_tokens(self) -> int:
        """The chat template's own tokens for a system and a user message (measured once)."""
        if self._template is None:
            self._template = TEMPLATE_ESTIMATE
            if isinstance(self.counter, ChatTokenCounter):
                try:
                    whole = self.counter.count_chat(messages(_PROBE, _PROBE))
                    self._template = max(0, whole - 2 * self.counter.count(_PROBE))
                except ModelError:  # a template that rejects the probe rejects the prompt too
                    pass
        return self._template

    def fit(self, items: Sequence[Item], *, text: str, input_id: str, budget: int, limit: int,
            quotas: dict[str, int], conflicts: Sequence[Conflict], plain: bool = False) -> Fitted:
        """Compile ``items`` and make the prompt for ``text`` so that it fits ``limit``
        (context size − answer reserve); ``budget`` is the context's budget before the charge.
        ``plain``: the lines spliced without the template (``ContextCompiler.compile``)."""
        template = self.template_tokens()
        tokens = self.counter.count(text)
        room = charge_input(budget=budget, limit=limit, template=template, input_tokens=tokens,
                            floor_share=self.floor_share)
        attempt = _Attempt(room.context_budget)
        for _ in range(_PASSES):
            compiled = self._compile(items, attempt, input_id, quotas, conflicts, plain)
            free = max(0, limit - template - compiled.tokens)
            if attempt.cut is None and tokens > free:
                # room for the note line, its numbers at their widest
                note = self.counter.count(note_text(tokens, tokens, tokens)) + 2
                attempt.cut = shorten(text, max(1, free - note), self.counter.count, self.policy)
                continue
            sent = attempt.cut.text if attempt.cut is not None else text
            over = self._overflow(compiled, sent, template, limit)
            if over <= 0:
                break
            self._tighten(attempt, over, room, text)
        else:  # out of passes: the last attempt as it stands
            compiled = self._compile(items, attempt, input_id, quotas, conflicts, plain)
            sent = attempt.cut.text if attempt.cut is not None else text
        charge = InputCharge(tokens=tokens, template=template, limit=limit, charged=room.budget - attempt.budget,
                             shortened=attempt.cut)
        return Fitted(compiled=compiled, prompt=messages(compiled.text(), sent), charge=charge)

    def _compile(self, items: Sequence[Item], attempt: _Attempt, input_id: str, quotas: dict[str, int],
                 conflicts: Sequence[Conflict], plain: bool) -> CompiledContext:
        extra = [note_item(attempt.cut, input_id)] if attempt.cut is not None else []
        return self.compiler.compile([*items, *extra], budget=attempt.budget, quotas=quotas, conflicts=conflicts,
                                     plain=plain)

    def _overflow(self, compiled: CompiledContext, sent: str, template: int, limit: int) -> int:
        """Tokens the prompt is over ``limit`` (≤ 0 when it fits): estimated as the sum of its
        parts, counted exactly when the estimate is near the limit and the counter can."""
        estimate = template + compiled.tokens + self.counter.count(sent)
        if estimate <= limit - EXACT_MARGIN or not isinstance(self.counter, ChatTokenCounter):
            return estimate - limit
        try:
            return self.counter.count_chat(messages(compiled.text(), sent)) - limit
        except ModelError:
            return estimate - limit

    def _tighten(self, attempt: _Attempt, over: int, room: Room, text: str) -> None:
        """Take ``over`` tokens back: from the context while it is above its floor, else from the input."""
        if attempt.cut is None and attempt.budget - over >= room.floor:
            attempt.budget -= over
            return
        kept = attempt.cut.kept_tokens if attempt.cut is not None else self.counter.count(text)
        attempt.cut = shorten(text, max(1, kept - over), self.counter.count, self.policy)
