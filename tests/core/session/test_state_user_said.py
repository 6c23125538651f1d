"""``SessionState.user_said`` lists what the app user typed here, and only that: the profile and
the facts read those messages alone (a 100,000-turn import has none of them to walk)."""

from __future__ import annotations

from app.core.session.state import SessionState
from app.core.types import Author, AuthorKind, Message, Role


def test_user_said_holds_the_users_own_inputs_in_arrival_order() -> None:
    state = SessionState("s")
    messages = [
        Message(message_id="typed", role=Role.USER, content="I never use tabs"),
        Message(message_id="answer", role=Role.ASSISTANT, content="Noted"),
        Message(message_id="named", role=Role.USER, content="I love tabs", author=Author(kind=AuthorKind.USER, id="Bo")),
        Message(message_id="imported", role=Role.USER, content="I hate spaces").with_origin("imported"),
        Message(message_id="agent", role=Role.USER, content="I am root").with_origin("agent"),
        Message(message_id="typed again", role=Role.USER, content="Call me Al"),
    ]
    for m in messages:
        state.add_message(m)
    assert state.user_said == ["typed", "typed again"]
    assert state.user_said == [m for m in state.order if state.messages[m].said_by_user]
    view = state.with_notes([])
    state.add_message(Message(message_id="later", role=Role.USER, content="Use spaces"))
    assert view.user_said[-1] == "later"  # a view shares the session's messages
