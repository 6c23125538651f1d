"""``pcm eval followups``: the dev sessions made from a LoCoMo-shaped folder, their replay through
the engine's routing, and the scoring and fitting of the follow-up weights."""

from __future__ import annotations

import json
from pathlib import Path

from app.eval.followup_data import _names, clean, make_sessions, read_sessions, write_sessions
from app.eval.followups import decide, fit_weights, run_followups, score

#: Three made-up two-person conversations, two sessions each (lines alternate speakers).
TOPICS = {
    "conv-1": ("Ana", "Ben", ["gardening tomatoes compost seedlings", "greenhouse watering tomatoes mulch"]),
    "conv-2": ("Cara", "Dan", ["marathon training intervals shoes", "marathon pacing hydration shoes"]),
    "conv-3": ("Eve", "Finn", ["violin lessons orchestra rehearsal", "violin concert orchestra tuning"]),
}


def _locomo(folder: Path) -> Path:
    lines = []
    for conv, (user, other, sessions) in TOPICS.items():
        for d, words in enumerate(sessions, start=1):
            w = words.split()
            for k in range(10):
                author = user if k % 2 == 0 else other
                text = (f"Hey {other}! [image: a photo] My {w[k % 4]} and {w[(k + 1) % 4]} went well"
                        if author == user else f"Nice, {user}! Tell me about the {w[(k + 2) % 4]}.")
                lines.append({"conversation": conv, "id": f"{conv}/D{d}:{k + 1}",
                              "ts": f"2023-05-0{d}T10:{k:02d}:00", "author": author, "text": text})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "messages.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return folder


def test_clean_drops_captions_and_forms_of_address() -> None:
    names = _names({"Melanie", "Caroline"})
    assert clean("Hey Mel! [image: a cat] Thanks, Caroline!", names) == "Hey! Thanks!"
    assert clean("Melanie's garden is lovely", names) == "Melanie's garden is lovely"


def test_sessions_interleave_whole_conversations_with_gold(tmp_path: Path) -> None:
    sessions = make_sessions(_locomo(tmp_path / "locomo"), exchanges=4)
    assert [(s.id, s.half) for s in sessions] == [("followups-01", "A"), ("followups-02", "B")]
    for s in sessions:
        assert s.turns[0].kind == "new"
        seen: list[str] = []
        for prev, turn in zip((None, *s.turns), s.turns, strict=False):
            assert "[image" not in turn.text and not any(n in turn.text for n in ("Ben", "Dan", "Finn"))
            if turn.kind == "new":
                assert turn.conversation not in seen
            elif turn.kind == "stay":
                assert prev is not None and turn.conversation == prev.conversation
            else:
                assert turn.conversation in seen and prev is not None and turn.conversation != prev.conversation
            seen.append(turn.conversation)
        assert {t.conversation.split("/")[0] for t in s.turns} == set(TOPICS)
        # each conversation's inputs are its first exchanges, in order (a conversation left where
        # its next line does not name it is not returned to)
        for conv in {t.conversation for t in s.turns}:
            numbers = [int(t.id.rsplit(":", 1)[1]) for t in s.turns if t.conversation == conv]
            assert numbers == [1, 3, 5, 7][:len(numbers)]
    again = make_sessions(tmp_path / "locomo", exchanges=4)
    assert again == sessions  # seeded: the same sessions each time
    assert read_sessions(write_sessions(sessions, tmp_path / "out")) == sessions


def test_score_counts_the_conversation_and_new_roots() -> None:
    rows = [{"predicted": "a", "gold": "a"}, {"predicted": None, "gold": None}, {"predicted": "a", "gold": "b"},
            {"predicted": None, "gold": "b"}]
    assert score(rows) == {"n": 4.0, "thread_acc": 50.0, "new_P": 50.0, "new_R": 100.0}


def test_fit_picks_the_weight_that_routes_the_fit_half_right() -> None:
    def row(half: str, gold: str | None, follow_on: str) -> dict:
        # two candidates: "x" close in meaning, "y" the referent of a follow-up (recorded follow 0.5)
        return {"half": half, "gold": gold, "candidates": [
            {"conversation": "x", "score": 0.8, "components": {"sem": 0.8}},
            {"conversation": "y", "score": 0.7, "components": {"follow": 0.5, "recency": 0.2}}]
            if follow_on == "y" else []}

    rows = [row("A", "y", "y"), row("A", "y", "y"), row("B", "y", "y")]
    assert decide(rows[0], {"follow": 0.5}, {"follow": 0.5}, 0.75) == "x"
    assert decide(rows[0], {"follow": 1.0}, {"follow": 0.5}, 0.75) == "y"
    fitted = fit_weights(rows, "A", {"follow": 0.5, "shift": 0.5, "reply": 0.2}, 0.75, (0.0, 0.5, 1.0))
    assert fitted["weights"] == {"follow": 1.0, "shift": 0.0, "reply": 0.0}
    assert fitted["accuracy"] == {"A": 100.0, "B": 100.0}


def test_replay_routes_every_input_and_keeps_each_answer_in_its_turn(make_engine, tmp_path: Path) -> None:
    sessions = make_sessions(_locomo(tmp_path / "locomo"), exchanges=3)[:1]
    out = tmp_path / "pred.jsonl"

    report = make_engine.run(lambda engine: run_followups(engine, sessions, out_path=out), data_dir=tmp_path / "d1")
    forced = make_engine.run(lambda engine: run_followups(engine, sessions, forced=True), data_dir=tmp_path / "d2")
    n = len(sessions[0].turns)
    assert report["inputs"] == forced["inputs"] == n and not report["forced"] and forced["forced"]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == n and rows[0]["predicted"] is None and rows[0]["candidates"] == []
    assert {r["kind"] for r in rows} <= {"new", "stay", "return"}
    assert 0.0 <= report["scores"]["all"]["thread_acc"] <= 100.0
    # later inputs see one candidate per earlier turn (an input and its answer are one turn)
    assert all(c["conversation"] is not None for r in rows for c in r["candidates"])
    assert len(rows[1]["candidates"]) == 1


def test_ingest_joins_an_answer_to_its_input_turn(make_engine, tmp_path: Path) -> None:
    from app.core.types import Author, AuthorKind, Message, Role

    async def body(engine):
        state = await engine.open_session(None, title="t")
        msgs = [Message(message_id="q", turn_id="q", role=Role.USER, content="hi there", at="2024-01-01T10:00:00",
                        author=Author(kind=AuthorKind.USER)),
                Message(message_id="a", turn_id="q", role=Role.ASSISTANT, content="hello", at="2024-01-01T10:00:01",
                        author=Author(kind=AuthorKind.AGENT, id="assistant")),
                Message(message_id="q2", role=Role.USER, content="next", at="2024-01-01T10:01:00",
                        author=Author(kind=AuthorKind.USER))]
        await engine.ingest(state.session_id, msgs)
        reopened = await engine.open_session(state.session_id)
        return state, reopened

    state, reopened = make_engine.run(body, data_dir=tmp_path / "data")
    for s in (state, reopened):
        assert s.turns["q"].message_ids == ["q", "a"]
        assert s.turns["q2"].message_ids == ["q2"]
        assert len([n for n in s.graph.nodes() if n.ref_id in ("q", "q2")]) == 2


def test_the_cli_refuses_a_folder_without_sessions_and_a_half_it_does_not_have(tmp_path: Path, capsys) -> None:
    from app.cli import main

    (tmp_path / "empty").mkdir()
    assert main(["eval", "followups", str(tmp_path / "empty")]) == 2
    assert "neither sessions.jsonl nor LoCoMo's messages.jsonl" in capsys.readouterr().err
    folder = _locomo(tmp_path / "locomo")
    assert main(["eval", "followups", str(folder), "--fit", "C", "--write", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--fit takes a half of the sessions (A, B)" in err
    assert read_sessions(tmp_path / "out" / "sessions.jsonl") == make_sessions(folder)  # --write kept them
