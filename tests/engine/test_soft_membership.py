"""Soft tree membership through the engine: routing's doubt is stored on the turn's edge, survives
a reopen, and widens the context of an input routing hesitated over (real SQLite + LanceDB)."""

from __future__ import annotations

from app.core.engine.facade import Engine
from app.core.session.membership import ROUTED, RoutedShares
from app.core.types import Author, AuthorKind, EdgeKind, Message, Role
from tests.conftest import EngineFactory

#: Two conversations: a0 ← a1 (printer), b0 ← b1 (wifi); b1 was routed onto b0 unsure.
LINES = [("a0", "ana", "my printer prints blank pages", None, None),
         ("b0", "cid", "the wifi card drops every hour", None, None),
         ("a1", "bob", "reinstall the printer driver", "a0", None),
         ("b1", "dee", "which chipset is it, check lspci", "b0", 0.6)]


def _message(mid: str, who: str, text: str, n: int) -> Message:
    return Message(message_id=mid, role=Role.USER, content=text, at=f"2024-03-01T10:0{n}:00",
                   author=Author(kind=AuthorKind.USER, id=who))


def test_an_unsure_edge_is_kept_and_a_hesitation_brings_the_other_conversation(make_engine: EngineFactory) -> None:
    async def first(engine: Engine) -> str:
        state = await engine.open_session(None, title="two conversations")
        for n, (mid, who, text, parent, sure) in enumerate(LINES):
            await engine.ingest(state.session_id, [_message(mid, who, text, n)], chain=False, parents={mid: parent},
                                routed={mid: sure} if sure else None)
        return state.session_id

    session_id = make_engine.run(first)

    async def second(engine: Engine) -> None:  # a reopened session: the doubt was stored
        state = await engine.open_session(session_id)
        node = {m: state.node_of(state.messages[m].turn_id or "") for m in ("a0", "a1", "b0", "b1")}
        assert [e.attrs.get(ROUTED) for e in state.graph.out_edges(node["b1"], EdgeKind.CONTINUES)] == [0.6]
        assert [e.attrs for e in state.graph.out_edges(node["a1"], EdgeKind.CONTINUES)] == [{}]
        text = "which chipset, lspci check"  # the wifi conversation's words: on its merit it would enter

        async def context(routed: RoutedShares) -> set[str]:
            record, _ = await engine.build(session_id, text, budget=512, anchor_override=node["a1"], routed=routed)
            return {r.evidence_id for b in record.context.blocks for r in b.refs}

        hesitated = await context(RoutedShares(share=0.55, alternatives=((node["b1"], 0.45),), judged=True))
        assert {"b1", "b0"} <= hesitated  # b0 through b1's unsure edge: 0.45 × 0.6 ≥ the threshold
        assert "b1" in await context(RoutedShares())  # a user's choice judges nothing: the gate does
        sure = await context(RoutedShares(share=0.999, judged=True))
        assert not {"b0", "b1"} & sure  # routing ruled the wifi conversation out

    make_engine.run(second)
