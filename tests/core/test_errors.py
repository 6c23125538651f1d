"""The error base of DESIGN.md §5: one CoreError whose text is one user line; a missing record is
a NoRecordError (a LookupError, never a bare KeyError)."""

from __future__ import annotations

import pytest

from app.core.errors import CoreError, ModelError, NoRecordError, user_line
from app.core.session.graph import GraphError, NoNodeError, SessionGraph
from app.core.session.state import SessionState
from app.core.tasks.stack import NoTaskError, TaskError, TaskStack
from app.core.tools.model import ToolNotFound, ToolRefused


def test_no_record_is_a_lookup_error_not_a_key_error() -> None:
    err = NoRecordError("no turn 't1'")
    assert isinstance(err, CoreError) and isinstance(err, LookupError)
    assert not isinstance(err, KeyError)
    assert str(err) == "no turn 't1'"  # not repr()'d as a KeyError's would be


def test_user_line_shows_a_core_error_as_itself_and_anything_else_as_a_bug() -> None:
    assert user_line(ModelError("the model file is truncated\nmore detail")) == "the model file is truncated"
    assert user_line(RuntimeError("boom\ntraceback-ish")) == "something went wrong: boom"
    assert user_line(ValueError()) == "something went wrong: ValueError"


@pytest.mark.parametrize("cls", [ModelError, TaskError, GraphError, ToolRefused, ToolNotFound])
def test_core_errors_share_the_base(cls: type[Exception]) -> None:
    assert issubclass(cls, CoreError)


def test_missing_records_of_core_stages_are_no_record_errors() -> None:
    with pytest.raises(NoTaskError) as task_err:
        TaskStack().get("nope")
    assert isinstance(task_err.value, TaskError) and isinstance(task_err.value, NoRecordError)
    graph = SessionGraph("s1")
    with pytest.raises(NoNodeError) as node_err:
        graph.node("nope")
    assert isinstance(node_err.value, GraphError) and isinstance(node_err.value, NoRecordError)
    with pytest.raises(NoRecordError):
        graph.edge("nope")
    assert issubclass(ToolNotFound, NoRecordError)
    with pytest.raises(NoRecordError, match="no turn 'nope'"):
        SessionState("s1").as_of("nope")
