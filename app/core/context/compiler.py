"""The context compiler: candidates and state in, budgeted context blocks bound to evidence out.

The compiled context answers the minimal task-state questions (seed 000 §2.2) in a fixed,
structured template — who the user is, the big picture, progress, the current goal and its
acceptance, the evidence available, the tools available — each section a ``ContextBlock`` with a
type, a priority, its token count by the active counter and refs to the evidence it carries.

Budgeting: ``must`` blocks first; then each segment up to its quota from the plan; then whatever
is left of the total goes to the best remaining items in priority order (within a priority, by
the plan's evidence priority, then score). Only the items given are packed: budget the items do
not need stays unused (the relevance gate decided what may enter). The final context is
re-counted as one string and trimmed from the lowest priority until it fits, so it is never over
budget as counted by the active tokenizer. Every dropped item is recorded with its reason.

Order (seed 001 §1.3, "lost in the middle"): the salient parts sit at the edges. The
instruction, goal and state open the context; the evidence closes it, right before the input,
its groups arranged by their best score from the edges inwards (the best group last, the
runner-up first, the weakest in the middle); conversation lines stay in time order.

``plain=True`` (an evaluation's ablation of the structured template, ``Ablation.TEMPLATE``)
packs the same way but splices the chosen lines one after another in the order they were taken,
the instruction first: no section headers, no day labels, no edge order (nor their tokens).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from app.core.ports import TokenCounter
from app.core.types import BlockType, ContextBlock, Priority, Ref

SEGMENT_ORDER: tuple[BlockType, ...] = (
    BlockType.INSTRUCTION,
    BlockType.PLAN,
    BlockType.STATE,
    BlockType.SUMMARY,
    BlockType.CONVERSATION,
    BlockType.MEMORY,
    BlockType.EVIDENCE,
)
PRIORITY_RANK = {Priority.MUST: 0, Priority.HIGH: 1, Priority.MEDIUM: 2, Priority.LOW: 3}


@dataclass(frozen=True, slots=True)
class Item:
    """One unit the compiler may include: a line of a section, bound to its evidence."""

    item_id: str  # evidence id (message, note) or a synthetic id for derived lines
    segment: BlockType
    text: str
    priority: Priority = Priority.MEDIUM
    score: float = 0.0  # higher first within a segment
    group: str = ""  # items of one group render under one header (e.g. a day)
    order: int = 0  # chronological position for rendering
    evidence_ids: tuple[str, ...] = ()
    tokens: int | None = None  # a known count of ``text`` (else the compiler counts it)
    selector: str = ""  # which part of its evidence the line carries (e.g. "chars:0-812")
    rank: int = 0  # position of its evidence type in the plan's evidence priority (lower first)
    # The evidence the line was derived from (a memory's source messages): refs with the selector
    # ``SOURCE``, after the line's own, so "[n] → its evidence" stays one ref per numbered line.
    sources: tuple[str, ...] = ()


SOURCE = "source"  # the selector of a ref to the evidence a line was derived from (not shown by it)


@dataclass(frozen=True, slots=True)
class Fact:
    """A keyed statement, for conflict resolution (e.g. a preference, a setting, a status)."""

    key: str
    value: str
    evidence_id: str
    reliability: float  # source reliability in [0, 1]: user statement > tool > model output
    at: str
    confidence: float = 1.0


class Conflict(BaseModel):
    key: str
    chosen: str
    chosen_evidence: str
    others: list[dict[str, str]]
    rule: str


class Dropped(BaseModel):
    item_id: str
    segment: str
    tokens: int
    reason: str


class SegmentUsage(BaseModel):
    quota: int
    used: int


class CompiledContext(BaseModel):
    """The result: blocks in prompt order, what was left out and why, the budget by segment."""

    blocks: list[ContextBlock]
    dropped: list[Dropped] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)
    budget: int
    tokens: int
    counter: str
    segments: dict[str, SegmentUsage] = Field(default_factory=dict)

    def text(self) -> str:
        return render(self.blocks)

    def source_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for block in self.blocks:
            for ref in block.refs:
                seen.setdefault(ref.evidence_id, None)
        return list(seen)


def render(blocks: Sequence[ContextBlock]) -> str:
    return "\n\n".join(b.content for b in blocks if b.content)


HEADERS: dict[BlockType, str] = {
    BlockType.INSTRUCTION: "",
    BlockType.PLAN: "Current goal:",
    BlockType.STATE: "What is known about the user and the work:",
    BlockType.SUMMARY: "Earlier in this branch (summarized; the turns each line covers in brackets):",
    BlockType.CONVERSATION: "This branch so far:",
    BlockType.EVIDENCE: "Evidence:",
    BlockType.MEMORY: "Notes:",
}


class _Packing:
    """The running state of one compilation: what is chosen and what it costs so far (a
    segment's header and a group's label are paid by the first line that opens them)."""

    def __init__(self, counter: TokenCounter, items: Sequence[Item], *, plain: bool = False) -> None:
        self.counter = counter
        self.plain = plain  # no headers, no group labels: they cost nothing
        self.cost = {it.item_id: it.tokens if it.tokens is not None else counter.count(it.text) for it in items}
        self.header_cost = {seg: 0 if plain else counter.count(h) for seg, h in HEADERS.items()}
        self.chosen: list[Item] = []
        self.dropped: list[Dropped] = []
        self.used = 0
        self.seg_used: dict[BlockType, int] = {seg: 0 for seg in SEGMENT_ORDER}
        self.seg_open: set[BlockType] = set()
        self.groups_open: set[tuple[BlockType, str]] = set()

    def extra(self, it: Item) -> int:
        """What taking ``it`` now adds: its line, and the header or group label it opens."""
        more = self.cost[it.item_id]
        if it.segment not in self.seg_open:
            more += self.header_cost[it.segment]
        if it.group and not self.plain and (it.segment, it.group) not in self.groups_open:
            more += self.counter.count(it.group)
        return more

    def take(self, it: Item) -> None:
        c = self.extra(it)
        self.chosen.append(it)
        self.used += c
        self.seg_used[it.segment] += c
        self.seg_open.add(it.segment)
        if it.group:
            self.groups_open.add((it.segment, it.group))

    def drop(self, it: Item, reason: str) -> None:
        self.dropped.append(Dropped(item_id=it.item_id, segment=it.segment, tokens=self.cost[it.item_id], reason=reason))


class ContextCompiler:
    """Packs items into blocks under a token budget, counted by ``counter``."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def compile(
        self,
        items: Sequence[Item],
        *,
        budget: int,
        quotas: dict[str, int],
        conflicts: Sequence[Conflict] = (),
        plain: bool = False,
    ) -> CompiledContext:
        """The blocks that fit ``budget``: must items first, then each segment up to its
        ``quotas``, then the best of the rest; the joined text trimmed until it fits (``plain``:
        spliced without the template, module doc)."""
        packing = _Packing(self.counter, items, plain=plain)
        self._pack(packing, items, budget, quotas)
        blocks = self._trim(packing, budget)
        total = self.counter.count(render(blocks))
        segments = {
            seg.value: SegmentUsage(quota=quotas.get(seg.value, 0), used=sum(b.token_estimate for b in blocks if b.block_type == seg))
            for seg in SEGMENT_ORDER
        }
        return CompiledContext(
            blocks=blocks, dropped=packing.dropped, conflicts=list(conflicts), budget=budget, tokens=total,
            counter=self.counter.name, segments=segments,
        )

    @staticmethod
    def _pack(packing: _Packing, items: Sequence[Item], budget: int, quotas: dict[str, int]) -> None:
        by_priority = sorted(
            items,
            key=lambda it: (PRIORITY_RANK[it.priority], SEGMENT_ORDER.index(it.segment), it.rank, -it.score, it.order,
                            it.item_id),
        )
        # 1. must items, whatever the quotas say (they are small by construction)
        rest: list[Item] = []
        for it in by_priority:
            if it.priority != Priority.MUST:
                rest.append(it)
            elif packing.used + packing.extra(it) <= budget:
                packing.take(it)
            else:
                packing.drop(it, "must item over the total budget")
        # 2. each segment up to its quota; 3. leftovers into what remains of the total
        deferred: list[Item] = []
        for it in rest:
            c = packing.extra(it)
            if packing.seg_used[it.segment] + c <= quotas.get(it.segment.value, 0) and packing.used + c <= budget:
                packing.take(it)
            else:
                deferred.append(it)
        for it in deferred:
            if packing.used + packing.extra(it) <= budget:
                packing.take(it)
            else:
                packing.drop(it, "over the total budget" if quotas.get(it.segment.value, 0) else "segment has no quota")

    def _trim(self, packing: _Packing, budget: int) -> list[ContextBlock]:
        """The chosen items' blocks, the lowest priority dropped until the joined context fits
        by the counter too (tokenizers merge across joins)."""
        chosen = packing.chosen
        blocks = self._arranged(chosen, packing)
        while blocks and self.counter.count(render(blocks)) > budget:
            victim = max(
                (it for it in chosen if it.priority != Priority.MUST),
                key=lambda it: (PRIORITY_RANK[it.priority], -it.score, -it.order),
                default=None,
            )
            if victim is None:
                break
            chosen.remove(victim)
            packing.drop(victim, "trimmed: joined context over budget")
            blocks = self._arranged(chosen, packing)
        return blocks

    def _arranged(self, chosen: Sequence[Item], packing: _Packing) -> list[ContextBlock]:
        return plain_blocks(chosen, packing.cost) if packing.plain else self._blocks(chosen, packing.cost)

    def _blocks(self, chosen: Sequence[Item], cost: dict[str, int]) -> list[ContextBlock]:
        """One block per (segment, group), in template order; lines in chronological order."""
        sections: dict[tuple[BlockType, str], list[Item]] = {}
        for it in chosen:
            sections.setdefault((it.segment, it.group), []).append(it)
        keys = sorted(sections, key=lambda k: (SEGMENT_ORDER.index(k[0]), min(i.order for i in sections[k]), k[1]))
        keys = edge_order(keys, sections)
        blocks: list[ContextBlock] = []
        headed: set[BlockType] = set()
        for segment, group in keys:
            lines = sorted(sections[(segment, group)], key=lambda it: (it.order, it.item_id))
            parts: list[str] = []
            if segment not in headed and HEADERS[segment]:
                parts.append(HEADERS[segment])
            headed.add(segment)
            if group:
                parts.append(group)
            parts.extend(it.text for it in lines)
            content = "\n".join(parts)
            refs = line_refs(lines)
            priority = min((it.priority for it in lines), key=lambda p: PRIORITY_RANK[p])
            block_id = f"{segment.value}:{group or 'all'}:{lines[0].item_id}"
            blocks.append(
                ContextBlock(
                    block_id=block_id,
                    block_type=segment,
                    priority=priority,
                    # lines were counted one by one (cached); the joined context is counted exactly
                    token_estimate=sum(cost[it.item_id] for it in lines)
                    + sum(self.counter.count(p) for p in parts[: len(parts) - len(lines)]),
                    content=content,
                    refs=refs,
                )
            )
        return blocks


def plain_blocks(chosen: Sequence[Item], cost: dict[str, int]) -> list[ContextBlock]:
    """One block per chosen line, the instruction lines first, the rest in the order they were
    taken: the lines spliced without the template (``plain``)."""
    first = [it for it in chosen if it.segment == BlockType.INSTRUCTION]
    rest = [it for it in chosen if it.segment != BlockType.INSTRUCTION]
    return [ContextBlock(block_id=f"plain:{it.segment.value}:{it.item_id}", block_type=it.segment, priority=it.priority,
                         token_estimate=cost[it.item_id], content=it.text, refs=line_refs([it]))
            for it in [*first, *rest]]


def line_refs(lines: Sequence[Item]) -> list[Ref]:
    """The refs of ``lines``: each line's evidence with its selector, then what it was derived from."""
    return [ref for it in lines for ref in [*(Ref(evidence_id=e, selector=it.selector) for e in it.evidence_ids),
                                            *(Ref(evidence_id=s, selector=SOURCE) for s in it.sources)]]


def edge_order(keys: list[tuple[BlockType, str]], sections: dict[tuple[BlockType, str], list[Item]]
               ) -> list[tuple[BlockType, str]]:
    """``keys`` with the evidence groups rearranged from the edges inwards by their best score:
    the best last (next to the input), the second first, the weakest in the middle."""
    groups = [k for k in keys if k[0] == BlockType.EVIDENCE]
    if len(groups) < 2:
        return keys
    best = sorted(groups, key=lambda k: (-max(it.score for it in sections[k]), keys.index(k)))
    front = best[1::2]
    back = best[0::2][::-1]
    arranged = iter(front + back)
    return [next(arranged) if k[0] == BlockType.EVIDENCE else k for k in keys]


_FACT = re.compile(
    r"\b(?:my|our|the)\s+([a-z][a-z0-9 _-]{1,30}?)\s+(?:is|are|was|will be|=)\s+(?:now\s+)?([^.;!?\n]{1,60})",
    re.IGNORECASE,
)


#: Words a fact's subject never holds: "my siblings when I was young" names no subject.
_NOT_IN_KEY = frozenset("""i me you he she it we they him them us when where why how what who which that this
these those and or but if so because to of in on at for with from by about as is are was were be been do did
have has had not just really a an the my our your his her their its""".split())
#: A value in the speaker's own terms is a feeling, not a value of the subject: "my art is important to me".
_FEELING = frozenset("i me my mine myself i'm".split())
_VALUE_WORDS = 8  # a longer "value" is a remark, not a value
#: Something concrete in a value (a name, a number, a path): "the/our X is …" needs one to be a fact.
_CONCRETE = re.compile(r"\d|/|\b[A-Z][\w-]*")


def extract_facts(text: str, *, evidence_id: str, at: str, reliability: float) -> list[Fact]:
    """Keyed statements such as "my deadline is Friday" → Fact(key="deadline", value="Friday").

    Deliberately narrow (a possessive or "the" + "is/are/was/will be", a subject of at most
    three words with no function word, a value of at most eight words not about the speaker; after
    "the" or "our", a value naming something concrete: "the deadline is Friday", not "our community
    is amazing"): a missed fact costs nothing, a wrong key would raise a false conflict.
    """
    out: list[Fact] = []
    for match in _FACT.finditer(text):
        key = " ".join(match.group(1).lower().split())
        value = match.group(2).strip().rstrip(",")
        words, said = key.split(), value.lower().replace(",", " ").split()
        if len(words) > 3 or _NOT_IN_KEY.intersection(words) or len(said) > _VALUE_WORDS or _FEELING.intersection(said):
            continue
        if match.group(0)[:3].lower() in ("the", "our") and not _CONCRETE.search(value):
            continue
        if key and value:
            out.append(Fact(key=key, value=value, evidence_id=evidence_id, reliability=reliability, at=at))
    return out
