"""``TurnView.sitting``: a turn that starts ``SITTING_GAP`` or more after the one before it
starts the next sitting; recall lifts the sitting that clearly holds the best evidence."""

from __future__ import annotations

from app.core.session.state import SessionState
from app.core.types import Message, Role


def _state(times: list[str]) -> SessionState:
    state = SessionState("s")
    for n, at in enumerate(times):
        state.add_message(Message(message_id=f"m{n}", role=Role.USER, content=f"turn {n}", at=at, turn_id=f"t{n}"))
        state.add_message(Message(message_id=f"a{n}", role=Role.ASSISTANT, content="ok", at=at, turn_id=f"t{n}"))
    return state


def test_a_pause_of_an_hour_or_more_starts_the_next_sitting() -> None:
    state = _state(["2024-01-01T10:00:00", "2024-01-01T10:59:00",  # 59 minutes: the same sitting
                    "2024-01-01T11:59:00",  # 60 minutes after the last turn began
                    "2024-01-01T12:10:00Z", "2024-01-03T09:00:00+02:00", "not a time", "2024-01-03T09:05:00"])
    assert [state.turns[f"t{n}"].sitting for n in range(7)] == [0, 0, 1, 1, 2, 2, 2]
    assert state.sitting_of("m4") == state.sitting_of("a4") == 2  # an answer sits with its input
    assert state.sitting_of("nowhere") is None
    assert state.as_of("t5").sitting_of("m4") == 2  # a past view sees the same sittings
