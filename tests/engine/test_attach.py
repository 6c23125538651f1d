"""Attaching a file (``Engine.attach_file``) on real SQLite, LanceDB and the real local embedder:
the file becomes an env event (evidence, index, recall note) and an artifact node bound to it;
a question about a line deep in the file gets that line, with its selector; changed text is the
next version, the same text none; files that cannot be attached are refused in plain words; a
reopened engine shows the artifacts and replays the turns exactly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.config import Settings
from app.core.engine.attachments import Attached
from app.core.engine.facade import Engine
from app.core.errors import AttachError
from app.core.pipeline.record import TurnRecord
from app.core.types import EdgeKind, EvidenceType, NodeKind
from tests.conftest import EngineFactory, stored

KEY_LINE = "The spare key for the north gate is kept in the blue toolbox under the workbench."
QUESTION = "Where is the spare key for the north gate kept?"


def _notes(path: Path, *, deep_line: int = 300, lines: int = 400, extra: str = "") -> Path:
    rows = [f"Entry {i}: routine inventory of shelf {i % 17}, boxes counted and labelled." for i in range(1, lines + 1)]
    rows[deep_line - 1] = KEY_LINE
    path.write_text("\n".join(rows) + "\n" + extra, encoding="utf-8")
    return path


def _artifacts(engine: Engine, session_id: str) -> list:
    state = engine._ctx.sessions[session_id]
    return [n for n in state.graph.nodes(NodeKind.ARTIFACT) if n.attrs.get("attached")]


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory):
    from app import main as wiring

    return wiring.load_embedder(Settings.load(tmp_path_factory.mktemp("settings")))


@pytest.mark.model
def test_an_attached_file_is_an_artifact_bound_to_its_event_and_recalled_by_a_deep_line(
        make_engine: EngineFactory, tmp_path: Path, embedder) -> None:
    notes = _notes(tmp_path / "notes.txt")
    engine = make_engine(["Noted."], embedder=embedder, budget=1024)

    async def main() -> tuple[str, Attached, TurnRecord]:
        await engine.start()
        state = await engine.open_session(None, title="workshop")
        sid = state.session_id
        first = await (await engine.submit(sid, "Let's sort out the workshop this weekend.")).done
        attached = await engine.attach_file(sid, notes)
        await engine.memory_idle()

        # the artifact: "Attached: notes.txt v1", bound to the evidence of its env event
        [node] = _artifacts(engine, sid)
        assert node.node_id == attached.node_id and node.label == "Attached: notes.txt v1"
        assert node.ref_id == attached.evidence_id
        assert node.attrs["path"] == str(notes.resolve()) and node.attrs["version"] == 1 and node.attrs["attached"]
        env = state.graph.node(attached.env_node_id)
        assert env.kind == NodeKind.ENV and env.ref_id == attached.evidence_id
        out = {(e.kind, e.dst) for e in state.graph.out_edges(node.node_id)}
        assert (EdgeKind.DERIVED_FROM, env.node_id) in out
        assert (EdgeKind.REFERENCES, first.node_id) in out  # the branch the user was on
        # its event, named by no turn, is routed there too rather than to the environment lane
        assert attached.routed is not None and attached.routed.target_node == first.node_id
        assert attached.routed.how == "attached"
        evidence = await stored(engine, lambda s: s.get_evidence(attached.evidence_id))
        assert evidence.type == EvidenceType.ENV_EVENT and KEY_LINE in evidence.content
        [event] = await engine.env_events(sid)
        assert event.event_id == attached.evidence_id and event.kind == "file" and event.payload["attached"]
        assert attached.lines == 400 and attached.changed

        # a question about line 300 of 400: the line, with the selector of the lines it carries
        record = await (await engine.submit(sid, QUESTION)).done
        await engine.close()
        return sid, attached, record

    sid, attached, record = asyncio.run(main())
    text = record.build.context.text()
    refs = [r for b in record.build.context.blocks for r in b.refs
            if r.evidence_id == attached.evidence_id and r.selector.startswith("lines:")]
    assert refs and KEY_LINE in text, text
    spans = [tuple(int(x) for x in s.removeprefix("lines:").split("-")) for s in refs[0].selector.split(",")]
    assert any(a <= 302 <= b for a, b in spans), refs[0].selector  # file line 300, after the fence's two lines
    assert "<<< notes.txt" in text and ">>>" in text  # still quoted as outside text
    assert "Entry 150:" not in text  # compressed: not the whole file

    async def reopened(engine2: Engine) -> None:
        state = await engine2.open_session(sid)
        [node] = _artifacts(engine2, sid)
        assert node.node_id == attached.node_id and node.label == "Attached: notes.txt v1"
        assert any(e.dst == attached.env_node_id for e in state.graph.out_edges(node.node_id, EdgeKind.DERIVED_FROM))
        assert attached.evidence_id in state.notes and KEY_LINE in state.notes[attached.evidence_id].text
        for turn_id in state.turn_order:
            assert await engine2.replay(turn_id) == [], turn_id

    make_engine.run(reopened, embedder=embedder, budget=1024)


def test_changed_text_is_the_next_version_and_the_same_text_none(make_engine: EngineFactory, tmp_path: Path) -> None:
    notes = _notes(tmp_path / "notes.txt", lines=20, deep_line=5)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="versions")
        sid = state.session_id
        v1 = await engine.attach_file(sid, notes)
        same = await engine.attach_file(sid, notes)
        assert not same.changed and same.version == 1 and same.node_id == v1.node_id
        assert len(await engine.env_events(sid)) == 1 and len(_artifacts(engine, sid)) == 1  # nothing recorded
        _notes(notes, lines=20, deep_line=5, extra="owner: Dana\n")
        v2 = await engine.attach_file(sid, str(notes))
        assert v2.changed and v2.version == 2 and v2.evidence_id != v1.evidence_id
        node = state.graph.node(v2.node_id)
        assert node.label == "Attached: notes.txt v2" and node.ref_id == v2.evidence_id
        previous = [e for e in state.graph.out_edges(v2.node_id, EdgeKind.DERIVED_FROM) if e.dst == v1.node_id]
        assert previous and previous[0].attrs["previous_version"]
        assert not any(e.kind == EdgeKind.REFERENCES for e in state.graph.out_edges(v1.node_id))  # an empty session
        assert v1.routed is not None and v1.routed.target_kind == "lane"  # ... has no branch to put it on
        assert len(await engine.env_events(sid)) == 2
        again = await engine.attach_file(sid, notes)
        assert not again.changed and again.version == 2
        await engine.memory_idle()
        log = await stored(engine, lambda s: s.list_events(sid))
        assert [e["payload"]["version"] for e in log if e["type"] == "artifact.attached"] == [1, 2]
        assert await engine.replay_state(sid) == []  # the task log does not mistake them for task results

    make_engine.run(body)

    async def reopened(engine: Engine) -> None:
        sid = (await engine.list_sessions())[0]["session_id"]
        await engine.open_session(sid)
        versions = sorted((n.attrs["version"], n.label) for n in _artifacts(engine, sid))
        assert versions == [(1, "Attached: notes.txt v1"), (2, "Attached: notes.txt v2")]
        assert not (await engine.attach_file(sid, notes)).changed  # still the same text as v2

    make_engine.run(reopened)


def test_files_that_cannot_be_attached_are_refused_in_plain_words(make_engine: EngineFactory, tmp_path: Path) -> None:
    binary = tmp_path / "photo.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    big = tmp_path / "huge.log"
    big.write_text("x" * 3_000_100, encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café au lait, crème brûlée\n".encode("latin-1"))

    async def body(engine: Engine) -> None:
        sid = (await engine.open_session(None)).session_id
        cases = {tmp_path / "missing.txt": "missing.txt does not exist", binary: "photo.png is a binary file",
                 big: "huge.log is 3 MB; files up to 2 MB can be attached", empty: "empty.txt is empty",
                 tmp_path / "folder": "folder is a folder"}
        for path, says in cases.items():
            with pytest.raises(AttachError) as caught:
                await engine.attach_file(sid, path)
            assert str(caught.value).startswith(says), str(caught.value)
        assert await engine.env_events(sid) == [] and _artifacts(engine, sid) == []
        # UTF-8 with replacement: a stray Latin-1 byte is not a reason to refuse a text file
        attached = await engine.attach_file(sid, latin)
        [event] = await engine.env_events(sid)
        assert attached.version == 1 and "caf\ufffd au lait" in event.content

    make_engine.run(body)
