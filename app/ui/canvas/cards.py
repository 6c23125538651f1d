"""What each turn card says, from the session's state (pure: no Qt).

A card shows a title (its input's key words, distinctive within the session:
``titles.key_titles``), its input and the start of its answer; its tooltip has both whole. They
are read from the session's messages, so a session opened again shows what it showed before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.core.session.titles import key_titles
from app.core.types import Role

if TYPE_CHECKING:
    from app.core.session.state import SessionState


@dataclass(frozen=True)
class CardText:
    """A turn card's title, input and answer ("" while there is none)."""

    title: str
    question: str
    answer: str = ""


def turn_texts(state: SessionState) -> dict[str, tuple[str, str]]:
    """node id → (input, answer) of every turn of the session that has a node."""
    out: dict[str, tuple[str, str]] = {}
    for turn_id in state.turn_order:
        turn = state.turns[turn_id]
        views = [state.messages[m] for m in turn.message_ids if m in state.messages]
        if not turn.node_id or not views:
            continue
        answers = [v.text for v in views[1:] if v.role == Role.ASSISTANT]
        out[turn.node_id] = (views[0].text, answers[-1] if answers else "")
    return out


def card_texts(state: SessionState, node_ids: Iterable[str] | None = None) -> dict[str, CardText]:
    """node id → what the card says, for the session's turn nodes (or those of ``node_ids``);
    titles are chosen among all of the session's inputs, so that they tell cards apart."""
    texts = turn_texts(state)
    titles = key_titles({node_id: question for node_id, (question, _) in texts.items()})
    wanted = texts if node_ids is None else [n for n in node_ids if n in texts]
    return {n: CardText(titles[n], texts[n][0], texts[n][1]) for n in wanted}
