"""The daily loop's routing on the real parts (issue 31): SmolLM2-135M answers, all-MiniLM-L6-v2
embeds, SQLite and LanceDB store. A follow-up after a single turn stays on it; among three topics a
follow-up continues the one its words point to; an unrelated question starts a new branch; and
"Continue the answer" goes on with the answer it is pressed on, on its branch, not the latest one."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.engine.answer_length import CONTINUE_TEXT
from app.core.engine.context import EngineConfig
from app.core.engine.facade import Engine
from app.core.ports import GenerationParams
from app.core.types import BlockType
from tests.conftest import EngineFactory

MODELS = Path(__file__).resolve().parents[2] / "models"
KYOTO = "How far is it from Tokyo to Kyoto, and is the shinkansen worth it for a week-long trip?"
PYTHON = "My Python script raises KeyError: 'port' when it reads the settings from config.yaml."
EMAIL = "Write an email to my landlord asking him to repair the broken heating in the flat."


async def _ask(engine: Engine, sid: str, text: str, anchor: str | None = None) -> tuple[str, str | None, str]:
    """Submit ``text`` and wait for its answer: (its node, the node it continues, finish reason)."""
    run = await engine.submit(sid, text, anchor_override=anchor)
    record = await run.done
    return run.node_id, record.build.anchor_node, record.finish_reason


@pytest.mark.model
@pytest.mark.slow
def test_follow_ups_on_the_real_models(make_engine: EngineFactory) -> None:
    from app.llm.embedder import SentenceEmbedder
    from app.llm.llama import LlamaChatModel

    gguf = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.is_file() or not (MODELS / "all-MiniLM-L6-v2").is_dir():
        pytest.skip("the bundled models are not fetched")
    chat = LlamaChatModel(gguf, prompt_cache=False)

    async def body(engine: Engine) -> None:
        # 1. a follow-up right after a one-turn session stays on that turn
        one = (await engine.open_session(None, title="one turn")).session_id
        kyoto, _, _ = await _ask(engine, one, KYOTO)
        follow, anchor, _ = await _ask(engine, one, "And how long does the train take?")
        assert anchor == kyoto
        _, anchor, _ = await _ask(engine, one, "Which neighbourhood should we stay in?")
        assert anchor == follow  # a question with few words of its own goes on with the conversation
        _, anchor, _ = await _ask(engine, one, "What is the capital of Peru?")
        assert anchor is None  # a question with a subject of its own, unrelated: a new branch

        # 2. among three topics, a follow-up continues the one its words point to
        sid = (await engine.open_session(None, title="three topics")).session_id
        nodes = {name: (await _ask(engine, sid, text))[0] for name, text in
                 (("kyoto", KYOTO), ("python", PYTHON), ("email", EMAIL))}
        state = await engine.session_state(sid)
        assert all(state.graph.parent(n) is None for n in nodes.values())  # three topics, three roots
        first = dict(nodes)
        for text, gold in (("What about the shinkansen from Kyoto to Osaka?", "kyoto"),
                           ("And what if the port key is missing from config.yaml?", "python"),
                           ("Make the email to the landlord more polite.", "email")):
            node, anchor, _ = await _ask(engine, sid, text)
            assert anchor is not None and state.graph.root_of(anchor) == nodes[gold], text
            nodes[gold] = node

        # 3. an unrelated question starts a new branch
        rome, anchor, _ = await _ask(engine, sid, "Can you recommend a good book on the history of ancient Rome?")
        assert anchor is None

        # 4. "Continue the answer" on the Kyoto answer continues that one, on its branch, although
        # other branches answered since (the engine does the same whether it was cut or not)
        cut = first["kyoto"]
        cut_turn = state.graph.node(cut).ref_id or ""
        cut_record = await engine.turn_record(cut_turn)
        assert cut_record.output.strip()
        run = await engine.submit(sid, CONTINUE_TEXT, anchor_override=cut)
        record = await run.done
        assert record.build.anchor_node == cut and state.graph.parent(run.node_id) == cut
        history = {r.evidence_id for b in record.build.context.blocks if b.block_type == BlockType.CONVERSATION
                   for r in b.refs}
        answer_of = {n: state.turns[state.graph.node(n).ref_id or ""].message_ids[-1] for n in (cut, rome)}
        assert answer_of[cut] in history  # the model sees the answer it goes on with in its history,
        assert answer_of[rome] not in history  # not the latest answer of another branch

    # answers of at most 40 tokens: quick
    config = EngineConfig(llm_intent="off", default_budget=700, answer_reserve=40,
                          generation=GenerationParams(max_tokens=40))
    try:
        make_engine.run(body, chat=chat, embedder=SentenceEmbedder(MODELS / "all-MiniLM-L6-v2", n_threads=2),
                        config=config)
    finally:
        chat.close()
