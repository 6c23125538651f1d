"""After a crash: the streamed answer is kept as a partial answer, unfinished turns are marked
interrupted (never "building" forever), the index catches up, an interrupted rebuild is finished
before the index is used; a failed build or answer is recorded as failed. Replay stays exact.

A crash is simulated by closing the engine's store under it while an answer streams: nothing it
does afterwards reaches the folder, and its run lease is gone, as the operating system drops a
killed process's locks (``tests/store/test_crash_drill.py`` kills real ``pcm`` processes).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import pytest

from app.core.engine.context import EngineConfig
from app.core.engine.facade import Engine
from app.core.errors import CoreError, NoRecordError
from app.core.ports import CancelToken, ChatMessage, ChatResult, GenerationParams
from app.core.types import Message, NodeKind, Role
from app.llm.fakes import ScriptedChatModel
from tests.conftest import EngineFactory

LONG = " ".join(f"w{i}" for i in range(400))


def _config(checkpoint_s: float = 0.05) -> EngineConfig:
    return EngineConfig(default_budget=400, llm_intent="off", checkpoint_s=checkpoint_s)


async def _crash(engine: Engine) -> None:
    """The process dies: its store is gone from under it (connection and run lease)."""
    await engine._ctx.on_store(engine._ctx.store.close)


async def _turn(engine: Engine, turn_id: str) -> dict[str, Any]:
    row = await engine._ctx.on_store(engine._ctx.store.get_turn, turn_id)
    assert row is not None
    return row


async def _until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_streamed_answer_survives_a_crash_as_the_turn_s_partial_answer(make_engine: EngineFactory) -> None:
    async def main() -> None:
        first_engine = make_engine(["The blue theme.", LONG], delay=0.01, config=_config())
        await first_engine.start()
        state = await first_engine.open_session(None, title="t")
        first = await (await first_engine.submit(state.session_id, "I prefer the blue theme")).done
        seen: list[str] = []
        run = await first_engine.submit(state.session_id, "Which theme do I prefer?", on_token=seen.append)

        async def checkpointed() -> bool:
            cp = await first_engine._ctx.on_store(first_engine._ctx.store.answer_checkpoint, run.turn_id)
            return len(seen) >= 40 and cp is not None and cp["pieces"] >= 20

        await _until(checkpointed)
        assert (await _turn(first_engine, run.turn_id))["status"] == "streaming"
        await _crash(first_engine)
        shown = "".join(seen)
        run.stop()
        with pytest.raises(CoreError):
            await run.done

        engine = make_engine(config=_config())  # the next start on the same folder
        report = await engine.start()
        assert report.interrupted == [run.turn_id] and report.lines()
        row = await _turn(engine, run.turn_id)
        record = await engine.turn_record(run.turn_id)
        assert row["status"] == "interrupted" and record.finish_reason == "interrupted"
        partial = record.output
        assert shown and partial.startswith(shown) and LONG.startswith(partial)  # all the user saw
        assert report.partial_chars[run.turn_id] == len(partial)
        answer = await engine._ctx.on_store(engine._ctx.store.get_message, row["answer_message_id"])
        assert answer.content == partial and answer.role == Role.ASSISTANT
        assert [r.evidence_id for r in answer.refs] == record.build.context.source_ids()
        reopened = await engine.open_session(state.session_id)
        assert answer.message_id in reopened.messages  # part of the conversation from now on
        assert await engine.replay(first.turn_id) == [] and await engine.replay(run.turn_id) == []
        later = await (await engine.submit(state.session_id, "And which theme was it again?")).done
        assert await engine.replay(later.turn_id) == []
        assert engine._recovery.catch_up_task is not None
        await engine._recovery.catch_up_task
        assert answer.message_id in await engine._ctx.on_index(engine._ctx.index.ids)
        assert await engine.turn_statuses(state.session_id) == {
            first.turn_id: "answered", run.turn_id: "interrupted", later.turn_id: "answered"}
        await engine.close()

    asyncio.run(main())


def test_every_piece_is_in_the_store_before_it_is_shown(make_engine: EngineFactory) -> None:
    """Write-ahead: when a piece reaches ``on_token``, a committed checkpoint (read through a
    connection of its own, as another process would) already holds it; the pieces still come
    in order and whole, and the stored answer is the streamed text."""
    async def main() -> None:
        engine = make_engine(["The blue theme.", LONG], delay=0.002, config=_config(0.02))
        await engine.start()
        state = await engine.open_session(None, title="t")
        await (await engine.submit(state.session_id, "I prefer the blue theme")).done
        reader = sqlite3.connect(engine._ctx.store.db_path)
        shown: list[str] = []
        behind: list[tuple[int, int]] = []  # (chars shown, chars committed) when shown ran ahead

        def on_token(piece: str) -> None:
            shown.append(piece)
            rows = reader.execute("SELECT text FROM answer_checkpoints").fetchall()  # this turn's only
            committed = rows[0][0] if len(rows) == 1 else ""
            if not committed.startswith("".join(shown)):
                behind.append((len("".join(shown)), len(committed)))

        run = await engine.submit(state.session_id, "Which theme do I prefer?", on_token=on_token)
        record = await run.done
        reader.close()
        assert behind == [] and "".join(shown) == record.output and LONG.startswith(record.output)
        assert 1 < len(shown) and (await _turn(engine, run.turn_id))["status"] == "answered"
        await engine.close()

    asyncio.run(main())


def test_a_turn_killed_after_its_build_before_its_first_token_keeps_its_record(make_engine: EngineFactory) -> None:
    async def main() -> None:
        crashed = make_engine(chat=SilentModel(), config=_config())  # no token until it is stopped
        await crashed.start()
        state = await crashed.open_session(None)
        run = await crashed.submit(state.session_id, "a question answered too late")
        assert (await _turn(crashed, run.turn_id))["status"] == "building"
        await _crash(crashed)
        run.stop()
        engine = make_engine(config=_config())
        report = await engine.start()
        assert report.interrupted == [run.turn_id] and report.partial_chars == {run.turn_id: 0}
        row = await _turn(engine, run.turn_id)
        record = await engine.turn_record(run.turn_id)
        assert row["status"] == "interrupted" and row["answer_message_id"] is None
        assert record.finish_reason == "interrupted" and record.output == ""
        assert record.usage["error"] == "the app stopped before its answer started"
        assert record.build.text == "a question answered too late"
        await engine.open_session(state.session_id)
        assert await engine.replay(run.turn_id) == []
        await engine.close()

    asyncio.run(main())


def test_a_turn_killed_before_its_build_is_marked_and_gets_a_node(make_engine: EngineFactory) -> None:
    async def main() -> None:
        crashed = make_engine(config=_config())
        await crashed.start()
        state = await crashed.open_session(None)
        turn_id, _ = await crashed._ctx.on_store(crashed._ctx.store.record_user_input, state.session_id,
                                                "killed right after it was recorded")
        await _crash(crashed)
        engine = make_engine(config=_config())
        assert (await engine.start()).interrupted == [turn_id]
        assert await engine.turn_statuses(state.session_id) == {turn_id: "interrupted"}
        with pytest.raises(NoRecordError):
            await engine.turn_record(turn_id)
        reopened = await engine.open_session(state.session_id)
        nodes = [n for n in reopened.graph.nodes() if n.kind == NodeKind.TURN and n.ref_id == turn_id]
        assert len(nodes) == 1 and nodes[0].label == "killed right after it was recorded"
        # Builds read candidates' vectors from the index, which replay does not record: a build made
        # while the background catch-up is still embedding the recovered rows is not replayable
        # exactly (noted as a limit); wait for the catch-up as a person would see it finish.
        if engine._recovery.catch_up_task is not None:
            await engine._recovery.catch_up_task
        later = await (await engine.submit(state.session_id, "a new question")).done
        assert await engine.replay(later.turn_id) == []
        await engine.close()

    asyncio.run(main())


def test_a_turn_another_live_engine_is_answering_is_left_alone(make_engine: EngineFactory) -> None:
    async def main() -> None:
        live = make_engine([" ".join(f"w{i}" for i in range(120))], delay=0.01, config=_config())
        await live.start()
        state = await live.open_session(None)
        run = await live.submit(state.session_id, "a long answer please")
        other = make_engine(config=_config())  # another process opens the folder meanwhile
        assert (await other.start()).interrupted == []
        record = await run.done
        assert record.finish_reason == "stop"
        assert (await _turn(live, run.turn_id))["status"] == "answered"
        await other.close()
        await live.close()

    asyncio.run(main())


def test_rows_the_index_lacks_are_embedded_in_the_background_with_progress(make_engine: EngineFactory) -> None:
    async def main() -> None:
        engine = make_engine(config=_config())
        sid = await engine._ctx.on_store(engine._ctx.store.create_session, "imported")
        messages = [Message(role=Role.USER, content=f"note {i} about rivers") for i in range(150)]

        def write() -> None:  # committed to SQLite, never indexed (an import, or a crash in between)
            for m in messages:
                engine._ctx.store.add_message(sid, m)

        await engine._ctx.on_store(write)
        progress: list[tuple[str, int, int]] = []
        engine.index_progress.connect(lambda what, done, total: progress.append((what, done, total)))
        await engine.start()
        assert engine._recovery.catch_up_task is not None
        assert await engine._recovery.catch_up_task == 150
        assert {m.message_id for m in messages} <= await engine._ctx.on_index(engine._ctx.index.ids)
        assert progress[-1][1:] == (150, 150) and len(progress) >= 3  # batch by batch
        assert engine._recovery.report.caught_up == 150
        await engine.close()

    asyncio.run(main())


def test_an_interrupted_rebuild_is_finished_before_start_returns(make_engine: EngineFactory) -> None:
    async def main() -> None:
        first = make_engine(config=_config())
        await first.start()
        state = await first.open_session(None)
        await first.ingest(state.session_id, [Message(role=Role.USER, content=f"history {i}") for i in range(90)])
        assert first._recovery.catch_up_task is not None
        await first._recovery.catch_up_task  # (it may index some of those rows itself meanwhile)
        rows = await first._ctx.on_store(first._ctx.store.list_searchable)
        cancel = CancelToken()
        index: Any = first._ctx.index
        index.batch_size = 16
        await first._ctx.on_index(lambda: index.rebuild_rows(rows, on_progress=lambda d, t: cancel.cancel(),
                                                            cancel=cancel))
        assert index.needs_rebuild  # killed mid-rebuild: 16 of 90 rows
        await first.close()
        engine = make_engine(config=_config())
        progress: list[str] = []
        engine.index_progress.connect(lambda what, done, total: progress.append(what))
        report = await engine.start()
        assert report.rebuild_finished == 90 - 16 and not engine._ctx.index.needs_rebuild
        assert progress and progress[0].startswith("finishing the interrupted index rebuild")
        assert await engine._ctx.on_index(engine._ctx.index.ids) == {r.id for r in rows}
        await engine.close()

    asyncio.run(main())


class SilentModel(ScriptedChatModel):
    """Says nothing until it is stopped (a model still reading its prompt)."""

    def chat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResult:
        cancel = kw.get("cancel")
        while cancel is not None and not cancel.cancelled:
            time.sleep(0.01)
        return super().chat(messages, **{**kw, "on_token": None})


class FailingModel(ScriptedChatModel):
    """Streams a few words, then fails (a provider that dies mid-answer)."""

    def chat(self, messages: Sequence[ChatMessage], *, params: GenerationParams | None = None, stage: str = "answer",
             json_schema: dict[str, Any] | None = None, on_token: Any = None, cancel: Any = None) -> ChatResult:
        for word in ("Half", " an", " answer"):
            if on_token is not None:
                on_token(word)
        raise RuntimeError("the provider went away")


def test_failed_builds_and_answers_are_recorded_as_failed_with_what_streamed(make_engine: EngineFactory,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        engine = make_engine(chat=FailingModel(), config=_config(0.0))
        await engine.start()
        state = await engine.open_session(None)
        run = await engine.submit(state.session_id, "please answer")
        with pytest.raises(RuntimeError, match="went away"):
            await run.done
        row = await _turn(engine, run.turn_id)
        record = await engine.turn_record(run.turn_id)
        assert row["status"] == "failed" and record.finish_reason == "error"
        assert record.usage["error"] == "the provider went away" and record.output == "Half an answer"
        answer = await engine._ctx.on_store(engine._ctx.store.get_message, row["answer_message_id"])
        assert answer.content == "Half an answer" and answer.message_id in state.messages

        async def broken_build(*_args: Any, **_kw: Any) -> Any:
            raise CoreError("the build failed")

        monkeypatch.setattr(engine._turns, "build", broken_build)
        with pytest.raises(CoreError, match="build failed"):
            await engine.submit(state.session_id, "this one cannot be built")
        statuses = await engine.turn_statuses(state.session_id)
        assert sorted(statuses.values()) == ["failed", "failed"]  # never "recorded" forever
        monkeypatch.undo()
        await engine.close()

        again = make_engine(["ok"], config=_config())
        assert (await again.start()).interrupted == []  # failed is finished, not interrupted
        later = await (await again.submit(state.session_id, "one more")).done
        assert await again.replay(later.turn_id) == []
        await again.close()

    asyncio.run(main())


def test_a_locked_database_delays_checkpoints_without_a_traceback(make_engine: EngineFactory,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Four concurrent asks on one folder: a checkpoint write may find the database locked past
    the busy timeout. It is tried again with the next piece and reported once, in one line; the
    answer is whole and stored, and no background task logs a traceback."""
    async def main() -> None:
        engine = make_engine([LONG], delay=0.002, config=_config(0.01))
        await engine.start()
        state = await engine.open_session(None, title="t")
        store = engine._ctx.store
        real, failed = store.save_answer_checkpoint, [0]

        def locked(*args: Any) -> bool:
            if failed[0] < 3:
                failed[0] += 1
                raise sqlite3.OperationalError("database is locked")
            return bool(real(*args))

        store.save_answer_checkpoint = locked  # type: ignore[method-assign]
        shown: list[str] = []
        run = await engine.submit(state.session_id, "Tell me everything", on_token=shown.append)
        record = await run.done
        assert record.output == LONG == "".join(shown) and failed[0] == 3
        assert (await _turn(engine, run.turn_id))["status"] == "answered"
        await engine.close()

    with caplog.at_level("WARNING"):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
    said = [r.getMessage() for r in caplog.records if "answer checkpoint" in r.getMessage()]
    assert len(said) == 1 and "database is locked" in said[0] and "\n" not in said[0]
