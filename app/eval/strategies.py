"""The context strategies an evaluation report compares (seed 000 §8.5–§8.6), as named presets.

Only the context strategy changes between them: the same sessions, question, budget, token
counter, instruction lines, chat template, model and decoding.

- ``pcm``: the engine's build (intent, plan, routing, recall, gate, compile).
- the control systems, over the raw turns of the same session:
  ``b1-full`` (B1) the full history in time order, truncated to the budget — its most recent
  turns that fit; ``b2-last-n`` (B2) the last ``LAST_N`` turns, the oldest dropped until they fit;
  ``b3-rag`` (B3) plain top-k vector RAG: the turns nearest the question by the engine's own vector
  index (the embedder PCM's vector channel uses), spliced in rank order while they fit.
- the ablations, ``no-<mechanism>``: PCM with one ``app.core.types.Ablation`` closed, the rest
  unchanged (``MECHANISMS``, ``CLOSES``: the one place they are declared).

A control's context starts with the same instruction lines as PCM's (the system instruction and
the session's standing instruction), which count against the same budget; its turns follow as
``Speaker: text`` lines, with no header, date or number: no structure, no evidence boundary, no
progress state. The prompt is (system: that context, user: the question), as PCM's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app.core.ports import ChatMessage
from app.core.session.state import SessionState
from app.core.types import CLOSES, MECHANISMS
from app.eval.recall import LAST_N

Kind = Literal["pcm", "control", "ablation"]


@dataclass(frozen=True)
class Strategy:
    """One context strategy: its name (in files and tables), label, kind, what it does and, for
    PCM and its ablations, the mechanisms closed (``EngineConfig.ablate``)."""

    name: str
    label: str
    kind: Kind
    about: str
    ablate: tuple[str, ...] = ()


PCM = Strategy("pcm", "PCM", "pcm", "the engine's build: intent, plan, anchor routing, recall, gate, compile")
B1 = Strategy("b1-full", "B1 full history", "control",
              "the full history in time order, truncated to the budget (its most recent turns that fit)")
B2 = Strategy("b2-last-n", f"B2 last {LAST_N} turns", "control",
              f"the last {LAST_N} turns, the oldest dropped until they fit")
B3 = Strategy("b3-rag", "B3 top-k RAG", "control",
              "plain top-k vector RAG over the raw turns: the nearest by the engine's vector index, in rank order")
CONTROLS = (B1, B2, B3)
ABLATIONS = tuple(Strategy(f"no-{m.value}", f"PCM − {m.value}", "ablation", CLOSES[m], (m.value,)) for m in MECHANISMS)
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (PCM, *CONTROLS, *ABLATIONS)}


@dataclass
class Context:
    """A strategy's context for one question at one budget: PRED blocks (``block_id``,
    ``block_type``, ``content``, ``source_ids``), the prompt, its token count and how long making it took."""

    blocks: list[dict[str, Any]]
    prompt: list[ChatMessage]
    tokens: int
    build_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def control_context(strategy: Strategy, state: SessionState, question: str, *, instructions: Sequence[str],
                    count: Callable[[str], int], budget: int, ranked: Sequence[str] = ()) -> Context:
    """A control system's context (module doc); ``ranked``: the vector ranking (B3's order)."""
    if strategy is B3:
        taken = [m for m in ranked if m in state.messages]
        keep_all = False  # skip a turn that does not fit, try the next
    else:
        taken = list(reversed(state.order if strategy is B1 else state.order[-LAST_N:]))
        keep_all = True  # contiguous: stop at the first that does not fit
    head = "\n\n".join(instructions)
    left = budget - count(head)
    chosen: list[str] = []
    for mid in taken:
        cost = count(state.messages[mid].render())
        if cost <= left:
            chosen.append(mid)
            left -= cost
        elif keep_all:
            break
    order = chosen if strategy is B3 else chosen[::-1]  # rank order, else time order
    system = _joined(head, state, order)
    while order and count(system) > budget:  # a tokenizer that merges across lines: drop the least wanted
        order = order[:-1] if strategy is B3 else order[1:]
        system = _joined(head, state, order)
    block_type = "evidence" if strategy is B3 else "conversation"
    blocks = [{"block_id": f"instruction:{n}", "block_type": "instruction", "content": text, "source_ids": []}
              for n, text in enumerate(instructions)]
    blocks += [{"block_id": mid, "block_type": block_type, "content": state.messages[mid].render(), "source_ids": [mid]}
               for mid in order]
    return Context(blocks, [{"role": "system", "content": system}, {"role": "user", "content": question}],
                   count(system))


def _joined(head: str, state: SessionState, order: Sequence[str]) -> str:
    lines = "\n".join(state.messages[m].render() for m in order)
    return f"{head}\n\n{lines}" if lines else head
