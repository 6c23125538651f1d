"""Progressive detail (seed 004 §5.3): how much of a branch a context carries, as the user set it.

A context shows the anchor's branch as raw turns (the main chain's window) and, before them, the
branch summary's parts (``pipeline/summary_items`` decides each part's level, the prompt's
history section ``context/sections/history`` makes the lines), each at a level. The user changes that per
part and per turn, and the engine recompiles the turn's context within the same budget
(``app.core.engine.detail``). What they chose is a ``Detail``, recorded with the build
(``BuildRecord.detail``) and fed back on replay:

- **expand** a part (its span ``a-b``, the message indexes it covers): the next finer level —
  brief → standard → detailed → the raw turns;
- **collapse** a part: the next coarser level — raw turns → detailed → standard → brief →
  hidden (left out); collapse a raw turn of the main chain: it and everything before it are
  carried by the summary instead (``through``: up to the end of the part that covers it);
- **focus** a node: its branch (its raw window and its summary) joins the context as a second
  subject besides the anchor's; focus on nothing takes that back.

``apply`` is pure: it takes the detail as recorded, the action and what the build showed, and
returns the new detail or raises ``DetailError`` with words for the user.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.core.context.sections.history import HIDDEN, RAW, span_of
from app.core.errors import CoreError
from app.core.memory.summaries import LEVELS

#: Every level a part can be shown at, coarsest first.
LADDER: tuple[str, ...] = (HIDDEN, *LEVELS, RAW)


class DetailError(CoreError, ValueError):
    """An action that cannot apply to the turn's context (said in one line for the user)."""


class DetailAction(BaseModel):
    """One progressive-detail action on a turn's context."""

    kind: Literal["expand", "collapse", "focus"]
    span: str = ""  # a summary part: "a-b" (the ``turns:a-b`` selector of its block ref)
    message_id: str = ""  # collapse: a raw turn of the context
    node_id: str | None = None  # focus: the node made a subject (None: focus back on the anchor only)


class Detail(BaseModel):
    """The detail a context carries beyond the plan's defaults (empty: the plan's)."""

    spans: dict[str, str] = Field(default_factory=dict)  # "a-b" → a level of ``LADDER``
    through: int | None = None  # messages up to this index are carried by the summary, not raw
    focus: str | None = None  # a node whose branch is a subject besides the anchor's
    actions: list[DetailAction] = Field(default_factory=list)  # in the order the user took them

    def empty(self) -> bool:
        return not self.spans and self.through is None and self.focus is None

    def level(self, span: str, default: str) -> str:
        return self.spans.get(span, default)


def apply(detail: Detail, action: DetailAction, *, shown: Mapping[str, str],
          parts: Sequence[Mapping[str, Any]], message_index: int | None = None) -> Detail:
    """The detail after ``action``. ``shown``: span → level the build showed each part at
    (``BuildRecord.detail["shown"]``); ``parts``: the anchor branch summary's parts; for a
    collapsed raw turn, ``message_index`` is its index in the session."""
    spans, through, focus = dict(detail.spans), detail.through, detail.focus
    if action.kind == "focus":
        focus = action.node_id
    elif action.span:
        spans[action.span] = _step(action, shown)
    elif action.kind == "collapse" and action.message_id:
        if message_index is None:
            raise DetailError("That turn is not in this context.")
        expanded = [span_of(p) for p in parts if p["first"] <= message_index <= p["last"]
                    and detail.spans.get(span_of(p)) == RAW]
        if expanded:  # a turn of an expanded part: the part goes back to its finest summary
            spans[expanded[0]] = LEVELS[-1]
        else:
            covering = [p for p in parts if p["first"] <= message_index <= p["last"]]
            if not covering:
                raise DetailError("No summary covers this turn yet, so it cannot be collapsed into one: "
                                  "summaries are written in the background after a few turns.")
            through = max(through or -1, int(covering[0]["last"]))
    else:
        raise DetailError("Say which part to expand or collapse.")
    return Detail(spans=spans, through=through, focus=focus, actions=[*detail.actions, action])


def _step(action: DetailAction, shown: Mapping[str, str]) -> str:
    level = shown.get(action.span)
    if level is None:
        raise DetailError(f"No summary of turns {action.span} is in this context.")
    at = LADDER.index(level)
    if action.kind == "expand":
        if at == len(LADDER) - 1:
            raise DetailError(f"Turns {action.span} are already shown in full.")
        return LADDER[at + 1]
    if at == 0:
        raise DetailError(f"Turns {action.span} are already left out.")
    return LADDER[at - 1]
