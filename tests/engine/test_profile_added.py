"""Profile statements the user adds in the Memory panel (``Engine.add_profile``), end to end on real
SQLite + LanceDB: they reach the profile of a new session and of the open ones, close what they
contradict (also in the session whose own message said the old statement), are not written twice,
and leave the replay of earlier turns exact."""

from __future__ import annotations

import asyncio

from app.core.engine.facade import Engine
from app.core.pipeline.record import TurnRecord
from tests.conftest import EngineFactory
from tests.engine.test_tools_env import _register_actions


async def _turn(engine: Engine, session_id: str, text: str) -> TurnRecord:
    record = await (await engine.submit(session_id, text)).done
    await engine.memory_idle()
    return record


def _profile_lines(record: TurnRecord) -> dict[str, list[str]]:
    """The context's profile lines ("Never: …", "Allowed: …", "Prefers: …") → their block's evidence ids."""
    out: dict[str, list[str]] = {}
    for block in record.build.context.blocks:
        for line in block.content.splitlines():
            if line.startswith(("Never: ", "Allowed: ", "Prefers: ")):
                out[line] = [r.evidence_id for r in block.refs]
    return out


def test_an_added_prohibition_acts_in_a_new_and_an_open_session(make_engine: EngineFactory) -> None:
    engine = make_engine(["Noted."])
    _register_actions(engine)

    async def main() -> None:
        await engine.start()
        try:
            one = await engine.open_session(None, title="Launch planning")
            other = await engine.open_session(None, title="Open beside it")
            before = await _turn(engine, one.session_id, "Let us plan the launch of the new site.")
            assert await engine.add_profile("Hello, how are you today.", one.session_id) is None

            added = await engine.add_profile("Never send emails to customers.", one.session_id)
            assert added is not None and added.held == [] and added.closed == []
            [memory] = added.added
            assert (memory.type, memory.content, memory.scope, memory.extractor) == (
                "prohibition", "send emails to customers", "workspace", "user")
            assert memory.context == "prohibition added by the user in the Memory panel"
            assert memory.source_evidence_ids == []
            assert memory.fragment_id in {m.fragment_id for _, m in await engine.memories()}
            assert await engine.replay(before.turn_id) == []  # the turn before saw no prohibition, and still sees none
            assert "Never: send emails to customers" not in _profile_lines(before)

            fresh = await engine.open_session(None, title="Fresh start")
            for state in (fresh, other, one):  # a new session, one open beside it, the one that keeps it
                blocked = await _turn(engine, state.session_id, "Please send_email the draft to all customers")
                assert "send_email" in blocked.build.plan["tools"]["blocked"], state.title
                lines = _profile_lines(blocked)
                assert lines.get("Never: send emails to customers") == [memory.fragment_id], lines
            assert await engine.replay(blocked.turn_id) == []

            again = await engine.add_profile("never send emails to customers", fresh.session_id)
            assert again is not None and again.added == [] and [m.fragment_id for m in again.held] == [
                memory.fragment_id]
            await engine.revoke_memory(memory.fragment_id)  # taken back: no session holds it any more
            for state in (fresh, one):
                freed = await _turn(engine, state.session_id, "Please send_email the draft to all customers")
                assert "send_email" not in freed.build.plan["tools"]["blocked"], state.title
                assert "Never: send emails to customers" not in _profile_lines(freed)
        finally:
            await engine.close()

    asyncio.run(main())


def test_an_added_prohibition_closes_a_permission_said_in_a_turn(make_engine: EngineFactory) -> None:
    engine = make_engine(["Noted."])

    async def main() -> None:
        await engine.start()
        try:
            one = await engine.open_session(None, title="Deploys")
            await _turn(engine, one.session_id, "You may delete files in the tmp folder.")
            lines = _profile_lines(await _turn(engine, one.session_id, "What is in the tmp folder?"))
            assert "Allowed: delete files in the tmp folder" in lines
            [permission] = [m for _, m in await engine.memories() if m.type == "permission"]

            added = await engine.add_profile("Never delete files in the tmp folder.", one.session_id)
            assert added is not None and [m.fragment_id for m in added.closed] == [permission.fragment_id]
            kept = {m.fragment_id: m for _, m in await engine.memories()}
            assert kept[permission.fragment_id].valid_to  # closed, kept
            # The session whose own input gave the permission: the later statement wins there too.
            after = await _turn(engine, one.session_id, "What should I do with the tmp folder today?")
            lines = _profile_lines(after)
            assert "Never: delete files in the tmp folder" in lines
            assert not any(line.startswith("Allowed: delete files") for line in lines)
            two = await engine.open_session(None, title="Elsewhere")
            lines = _profile_lines(await _turn(engine, two.session_id, "Anything about the tmp folder?"))
            assert "Never: delete files in the tmp folder" in lines
            assert not any(line.startswith("Allowed: delete files") for line in lines)
            # Said again in a turn, the permission wins over the added prohibition (the later wins).
            await _turn(engine, one.session_id, "You may delete files in the tmp folder.")
            lines = _profile_lines(await _turn(engine, two.session_id, "And the tmp folder now?"))
            assert "Allowed: delete files in the tmp folder (said in session \u201cDeploys\u201d)" in lines
            assert "Never: delete files in the tmp folder" not in lines
        finally:
            await engine.close()

    asyncio.run(main())
