"""Summaries and progressive detail on the real parts (issue 14): SmolLM2 writes the summaries of a
60-turn branch and answers, all-MiniLM-L6-v2 embeds, SQLite and LanceDB store. The branch's early
decision reaches a later context through the branch summary, expanding its part brings the raw
turns back within the budget, and the turn replays exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.engine.context import EngineConfig
from app.core.engine.facade import Engine
from app.core.pipeline.detail import DetailAction
from app.core.ports import GenerationParams
from app.core.types import Author, AuthorKind, Message, Role
from tests.conftest import EngineFactory

MODELS = Path(__file__).resolve().parents[2] / "models"
DECISION = "We decided to store the cache in /var/cache/pcm_v2 with a TTL of 37 minutes."
FILLERS = ["the lamp in room {k} is blue", "we walked {k} blocks to the bakery", "the plant on shelf {k} needs water",
           "there were {k} pigeons on the roof", "song number {k} was too loud"]


def _branch(turns: int = 60) -> list[Message]:
    said = ["Let us plan the caching layer.", DECISION,
            *(f"Small talk: {FILLERS[k % 5].format(k=k + 3)}." for k in range(turns - 2))]
    return [Message(role=Role.USER, author=Author(kind=AuthorKind.USER, id=who, name=who), content=text,
                    at=f"2026-03-02T10:{k // 60:02d}:{k % 60:02d}Z")
            for k, text in enumerate(said) for who in ["Ana" if k % 2 == 0 else "Bo"]]


@pytest.mark.model
def test_a_60_turn_branch_on_the_real_model_reaches_its_early_decision_through_the_summary_and_expands(
        make_engine: EngineFactory) -> None:
    from app.llm.embedder import SentenceEmbedder
    from app.llm.llama import LlamaChatModel

    gguf = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.is_file() or not (MODELS / "all-MiniLM-L6-v2").is_dir():
        pytest.skip("the bundled models are not fetched")
    chat = LlamaChatModel(gguf, prompt_cache=False)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="caching")
        sid = state.session_id
        await engine.ingest(sid, _branch())
        await engine.summarize(sid)
        outcomes = engine._summaries.stats.outcomes
        # the model was asked for every brief and standard part; what it wrote stood when it kept the identifiers
        assert outcomes["model"] + outcomes["invalid"] == 4 and outcomes["extractive"] == 2  # 2 parts × 2 levels; detailed
        last = state.node_of(state.turn_order[-1])
        asked = await (await engine.submit(sid, "Where did we decide to store the cache, and with which TTL?",
                                           anchor_override=last)).done
        assert asked.output.strip() and asked.model  # the real model answered
        decision = state.order[1]
        lines = [(b.content, r.selector) for b in asked.build.context.blocks if b.block_type.value == "summary"
                 for r in b.refs]
        spans = [sel.removeprefix("turns:") for _, sel in lines]
        span = next(s for s in spans if int(s.split("-")[0]) <= 1 <= int(s.split("-")[1]))  # the decision's part
        record = asked
        for _ in range(2):  # at its level, or one or two finer (the detailed level is verbatim)
            text = "\n".join(b.content for b in record.build.context.blocks if b.block_type.value == "summary")
            if "/var/cache/pcm_v2" in text and "37" in text:
                break
            record = (await engine.detail(asked.turn_id, DetailAction(kind="expand", span=span))).record
        assert "/var/cache/pcm_v2" in text and "37" in text  # verbatim, through the branch summary
        while True:  # expand to the raw turns
            step = await engine.detail(asked.turn_id, DetailAction(kind="expand", span=span))
            if step.detail.spans[span] == "raw":
                break
        raw = step.record.build
        first, end = (int(x) for x in span.split("-"))
        shown = {r.evidence_id for b in raw.context.blocks if b.block_type.value == "conversation" for r in b.refs}
        assert decision in shown and set(state.order[first:end + 1]) <= shown
        assert raw.context.tokens <= raw.context.budget == asked.build.context.budget
        assert await engine.replay(asked.turn_id) == []

    config = EngineConfig(llm_intent="off", summary_model="auto", summary_every=200, default_budget=700,
                          generation=GenerationParams(max_tokens=12))
    try:
        make_engine.run(body, chat=chat, embedder=SentenceEmbedder(MODELS / "all-MiniLM-L6-v2", n_threads=2),
                        config=config)
    finally:
        chat.close()
