"""ContextCompiler: must first, quotas, leftovers, never over budget, drops recorded, conflicts."""

from __future__ import annotations

from app.core.context.compiler import ContextCompiler, Fact, Item, render
from app.core.context.sections.conflicts import conflict_items, resolve_conflicts
from app.core.ports import WordTokenCounter
from app.core.types import BlockType, Priority

COUNTER = WordTokenCounter()


def _evidence(n: int, words: int = 10, score: float | None = None) -> Item:
    return Item(
        item_id=f"m{n}",
        segment=BlockType.EVIDENCE,
        text=f"[{n}] " + " ".join(["word"] * words),
        score=score if score is not None else 1.0 - n / 100,
        order=n,
        group="On 2024-01-01:",
        evidence_ids=(f"m{n}",),
    )


def _instruction() -> Item:
    return Item("sys", BlockType.INSTRUCTION, "Answer from the evidence.", Priority.MUST, evidence_ids=())


def test_must_first_then_best_scores_within_budget() -> None:
    items = [_instruction()] + [_evidence(n) for n in range(20)]
    out = ContextCompiler(COUNTER).compile(items, budget=80, quotas={"evidence": 80})
    assert out.blocks[0].block_type == BlockType.INSTRUCTION
    assert out.tokens <= 80
    assert COUNTER.count(render(out.blocks)) == out.tokens
    kept = out.source_ids()
    assert kept == [f"m{n}" for n in range(len(kept))]  # the best-scored, in order
    assert {d.item_id for d in out.dropped} == {f"m{n}" for n in range(len(kept), 20)}
    assert all(d.reason for d in out.dropped)


def test_blocks_render_chronologically_and_carry_refs() -> None:
    items = [_evidence(3, score=0.1), _evidence(1, score=0.9), _evidence(2, score=0.5)]
    out = ContextCompiler(COUNTER).compile(items, budget=500, quotas={"evidence": 500})
    (block,) = out.blocks
    assert block.content.splitlines()[:2] == ["Evidence:", "On 2024-01-01:"]
    assert [line[:3] for line in block.content.splitlines()[2:]] == ["[1]", "[2]", "[3]"]
    assert [r.evidence_id for r in block.refs] == ["m1", "m2", "m3"]
    # the estimate sums the lines (each counted once, cached); the whole context is exact
    assert abs(block.token_estimate - COUNTER.count(block.content)) <= len(block.content.splitlines())
    assert out.tokens == COUNTER.count(render(out.blocks))


def test_quota_holds_until_leftovers_are_shared() -> None:
    conv = [
        Item(f"c{n}", BlockType.CONVERSATION, "user: " + "x " * 8, Priority.HIGH, score=1 - n / 10, order=n, evidence_ids=(f"c{n}",))
        for n in range(5)
    ]
    ev = [_evidence(n) for n in range(5)]
    out = ContextCompiler(COUNTER).compile(conv + ev, budget=200, quotas={"conversation": 30, "evidence": 170})
    assert out.segments["conversation"].used <= 200
    assert out.tokens <= 200
    # With room left after every segment got its quota, leftovers are used rather than wasted.
    assert len(out.source_ids()) > 5


def test_never_over_budget_even_when_nothing_fits() -> None:
    items = [_instruction(), _evidence(0, words=200)]
    out = ContextCompiler(COUNTER).compile(items, budget=10, quotas={"evidence": 10})
    assert out.tokens <= 10
    assert [d.item_id for d in out.dropped] == ["m0"]


def test_conflicts_pick_reliable_then_recent_and_are_stated() -> None:
    facts = [
        Fact("theme", "dark", "e1", reliability=0.9, at="2024-01-01T00:00:00"),
        Fact("theme", "light", "e2", reliability=0.9, at="2024-02-01T00:00:00"),
        Fact("lang", "en", "e3", reliability=0.5, at="2024-03-01T00:00:00"),
        Fact("lang", "fr", "e4", reliability=1.0, at="2024-01-01T00:00:00"),
        Fact("name", "Ana", "e5", reliability=1.0, at="2024-01-01T00:00:00"),
        Fact("name", "ana", "e6", reliability=1.0, at="2024-02-01T00:00:00"),
    ]
    conflicts, losers = resolve_conflicts(facts)
    by_key = {c.key: c for c in conflicts}
    assert set(by_key) == {"theme", "lang"}  # same value in another case is no conflict
    assert by_key["theme"].chosen == "light" and by_key["theme"].rule == "more recent"
    assert by_key["lang"].chosen == "fr" and by_key["lang"].rule == "more reliable source"
    assert losers == {"e1", "e3"}


def test_extract_facts_is_narrow_and_keyed() -> None:
    from app.core.context.compiler import extract_facts

    facts = extract_facts("My deadline is Friday. The budget is 300 euros; I like tea.", evidence_id="m1", at="t", reliability=1.0)
    assert [(f.key, f.value) for f in facts] == [("deadline", "Friday"), ("budget", "300 euros")]
    assert extract_facts("It is what it is.", evidence_id="m", at="t", reliability=1.0) == []


def test_conflicts_are_stated_in_the_context_with_both_sources() -> None:
    from app.core.context.compiler import extract_facts

    facts = extract_facts("My deadline is Friday", evidence_id="m1", at="2024-01-01", reliability=1.0)
    facts += extract_facts("my deadline is now Monday", evidence_id="m2", at="2024-01-02", reliability=1.0)
    conflicts, _ = resolve_conflicts(facts)
    items = [_instruction(), *conflict_items(conflicts)]
    out = ContextCompiler(COUNTER).compile(items, budget=200, quotas={"state": 100})
    text = out.text()
    assert "Conflict on deadline: using 'Monday' [m2] (more recent)" in text and "'Friday' [m1]" in text
    assert {"m1", "m2"} <= set(out.source_ids())


def test_evidence_sits_at_the_end_best_group_last_and_budget_is_not_padded() -> None:
    items = [Item("i", BlockType.INSTRUCTION, "Answer.", Priority.MUST),
             Item("c", BlockType.CONVERSATION, "user: hi", Priority.HIGH, order=1, evidence_ids=("c",))]
    for n, (day, score) in enumerate([("d1:", 0.2), ("d2:", 1.0), ("d3:", 0.5), ("d4:", 0.9)]):
        items.append(Item(f"e{n}", BlockType.EVIDENCE, f"[{n}] fact {n}", Priority.MEDIUM, score=score, group=day,
                          order=10 + n, evidence_ids=(f"e{n}",)))
    out = ContextCompiler(COUNTER).compile(items, budget=400, quotas={"evidence": 200, "conversation": 50})
    kinds = [b.block_type for b in out.blocks]
    assert kinds == [BlockType.INSTRUCTION, BlockType.CONVERSATION] + [BlockType.EVIDENCE] * 4
    days = [next(line for line in b.content.split("\n") if line.startswith("d")) for b in out.blocks[2:]]
    # best (d2) last next to the input, runner-up (d4) first, the weakest (d1) inside
    assert days == ["d4:", "d1:", "d3:", "d2:"]
    assert out.blocks[2].content.startswith("Evidence:")
    assert out.tokens < 400 / 2  # what the items do not need stays unused


def test_evidence_priority_orders_packing_within_a_priority() -> None:
    items = [Item("model", BlockType.EVIDENCE, "[1] assistant: a long guess " * 3, Priority.MEDIUM, score=0.9, rank=5,
                  evidence_ids=("model",)),
             Item("user", BlockType.EVIDENCE, "[2] user: what they said " * 3, Priority.MEDIUM, score=0.5, rank=0,
                  evidence_ids=("user",))]
    budget = COUNTER.count("Evidence:") + COUNTER.count(items[1].text) + 2
    out = ContextCompiler(COUNTER).compile(items, budget=budget, quotas={"evidence": budget})
    assert out.source_ids() == ["user"]  # the user's own words before the model's output
