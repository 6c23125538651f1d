"""The input is charged against the budget: a long paste is shortened so the prompt fits the
model's context, the context says so and cites the stored input, and the turn replays exactly.

Real SQLite + LanceDB in tmp, the scripted model (which refuses a prompt over its context as the
real adapter does) and a counter that is the model's own tokenizer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.core.engine.facade import Engine, EngineConfig
from app.core.ports import ModelTokenCounter
from app.core.runtime.executors import Executors
from app.llm.fakes import HashEmbedder, ScriptedChatModel
from app.store.index import SearchIndex
from app.store.sqlite import SqliteStore
from tests.texts import long_paste

CONTEXT, RESERVE, BUDGET = 2048, 256, 1024


def _engine(tmp_path: Path) -> tuple[Engine, ScriptedChatModel]:
    ex = Executors()
    store = ex.pool("store").submit(SqliteStore, tmp_path / "pcm.sqlite3").result()
    embedder = HashEmbedder(dim=64)
    chat = ScriptedChatModel(["Fix the cold storage first [1]."], context_size=CONTEXT)
    engine = Engine(store=store, index=SearchIndex(tmp_path / "index", embedder), embedder=embedder, chat=chat,
                    counter=ModelTokenCounter(chat), executors=ex,
                    config=EngineConfig(default_budget=BUDGET, context_size=CONTEXT, answer_reserve=RESERVE,
                                        llm_intent="off"))
    return engine, chat


def test_a_long_paste_is_shortened_to_fit_cited_and_replayed(tmp_path: Path) -> None:
    engine, chat = _engine(tmp_path)
    paste = long_paste(3000)

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None)
        short = await (await engine.submit(state.session_id, "Where do we keep the pallet audit notes?")).done
        record = await (await engine.submit(state.session_id, paste)).done
        # A short input is not charged: the context keeps its whole budget, the input goes as written.
        charge = short.build.input
        assert charge is not None and charge.charged == 0 and charge.shortened is None
        assert short.build.context.budget == BUDGET and short.build.prompt[1]["content"] == short.build.text
        # The paste: answered, its prompt within context − answer reserve by the model's own count.
        assert record.finish_reason == "stop" and record.output
        assert chat.count_chat_tokens(record.build.prompt) <= CONTEXT - RESERVE
        assert chat.count_chat_tokens(record.build.prompt) == record.usage["prompt_tokens"]
        cut = record.build.input.shortened
        assert cut is not None and cut.tokens > CONTEXT and cut.kept_tokens < cut.tokens
        assert record.build.text == paste and record.build.prompt[1]["content"] == cut.text
        assert "words cut" in cut.text and cut.cut and cut.related
        # The context says it was shortened, and cites the stored input (the full text) with the kept spans.
        input_id = state.turns[record.turn_id].message_ids[0]
        note = [b for b in record.build.context.blocks if "was shortened" in b.content]
        assert note and [(r.evidence_id, r.selector) for r in note[0].refs] == [(input_id, cut.selector())]
        evidence = await engine._ctx.ex.run("store", engine._ctx.store.get_evidence, input_id)
        assert evidence is not None and evidence.content == paste
        assert input_id in record.build.context.source_ids()
        # Replay rebuilds the same cut, note and prompt.
        assert await engine.replay(short.turn_id) == []
        assert await engine.replay(record.turn_id) == []
        await engine.close()

    asyncio.run(main())


def test_an_input_that_only_overflows_the_budget_is_kept_whole(tmp_path: Path) -> None:
    engine, chat = _engine(tmp_path)
    text = long_paste(750)  # fits beside a smaller context, not beside the full budget

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None)
        record = await (await engine.submit(state.session_id, text)).done
        charge = record.build.input
        assert charge is not None and charge.shortened is None and charge.charged > 0
        assert record.build.context.budget == BUDGET - charge.charged
        assert record.build.prompt[1]["content"] == text
        assert chat.count_chat_tokens(record.build.prompt) <= CONTEXT - RESERVE
        assert record.finish_reason == "stop"
        assert await engine.replay(record.turn_id) == []
        await engine.close()

    asyncio.run(main())
