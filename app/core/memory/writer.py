"""What one memory write changes, decided in one place (pure): new memories, closings, link updates.

``plan_write(found, kept, now)`` takes the memories extracted from new evidence and every memory
already kept, and returns a ``Write``: the memories to store (each with its links), the kept ones
to rewrite (closed by a newer fact, or evolved by a new link), and the consolidations. Re-running
it on the same evidence writes nothing new (ids are derived from the evidence; a memory whose id
is kept, or that repeats a valid one, is skipped).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.core.memory import evolve
from app.core.memory.extract import WORKSPACE_TYPES
from app.core.text.words import content_stems
from app.core.types import MemoryFragment


@dataclass(slots=True)
class Write:
    new: list[MemoryFragment] = field(default_factory=list)
    changed: dict[str, MemoryFragment] = field(default_factory=dict)  # rewritten kept memories, by id
    closed: list[tuple[str, str]] = field(default_factory=list)  # (closed id, the id that closed it)

    def __bool__(self) -> bool:
        return bool(self.new or self.changed)


def plan_write(found: Sequence[MemoryFragment], kept: Sequence[MemoryFragment], now: str,
               similar: Mapping[str, Mapping[str, float]] | None = None) -> Write:
    """Decide the write for ``found`` against ``kept`` (see the module docstring).

    Only the memories that could matter are compared (``_Kept`` indexes them by id, statement,
    fact subject, content words and entity; ``similar`` gives, per found memory, the memories
    whose embeddings are close to its own, with the cosine), so a write costs the same with ten
    or ten thousand memories kept.

    A memory from outside that the user has not accepted (``MemoryFragment.pending``) speaks for
    no one: it neither closes nor links nor repeats a kept one, and no new memory is compared with it
    (only a proposal that repeats a pending one is not written again).
    """
    similar = similar or {}
    write = Write()
    pool = _Kept(kept)
    for memory in found:
        memory = memory.model_copy(update={"recorded_at": now})  # learned now (a replay before this does not see it)
        if pool.has(memory.fragment_id) or evolve.duplicate_of(memory, pool.same_statement(memory)) is not None:
            continue
        if memory.pending:  # from outside, not accepted: kept as it is (once); it closes and links nothing
            if evolve.duplicate_of(memory, pool.same_proposal(memory)) is None:
                pool.put(memory, write, new=True)
            continue
        replaced: list[dict[str, str]] = []
        for old in evolve.closes(memory, pool.rivals(memory)):
            closed = old.model_copy(update={"valid_to": memory.valid_from, "closed_at": now,
                                            "superseded_by": memory.fragment_id})
            pool.put(closed, write)
            write.closed.append((old.fragment_id, memory.fragment_id))
            replaced.append({"memory_id": old.fragment_id, "reason": f"replaces an earlier {old.type}: {old.content}"})
        near = similar.get(memory.fragment_id, {})
        related = pool.related(memory) + [pool.get(i) for i in near if pool.has(i)]
        links = evolve.links(memory, related, near)
        memory = memory.model_copy(update={"links": replaced + links})
        for link in links:
            evolved = evolve.evolve(pool.get(link["memory_id"]), memory, link["reason"], now)
            if evolved is not None:
                pool.put(evolved, write)
        pool.put(memory, write, new=True)
    for note, members in evolve.consolidate(pool.small(), now):
        if pool.has(note.fragment_id):
            continue
        pool.put(note, write, new=True)
        for member in members:
            pool.put(member.model_copy(update={"valid_to": now, "superseded_by": note.fragment_id}), write)
    return write


def accept_write(memory: MemoryFragment, kept: Sequence[MemoryFragment], now: str) -> Write:
    """What the user's accepting ``memory`` (from outside, pending) writes at ``now``.

    A preference, prohibition or permission becomes the user's own statement, said now
    (``evolve.as_users_statement``), decided as one added by hand is (held already, or closing what
    it contradicts), and ``memory`` is marked accepted and replaced by the statement that stands
    for it (``superseded_by``). Any other memory is marked accepted, nothing more.
    """
    if memory.type not in WORKSPACE_TYPES:
        return Write(changed={memory.fragment_id: memory.accepted(now)})
    own = evolve.as_users_statement(memory, now)
    write = plan_write([own], kept, now)
    stands = own if write.new else evolve.duplicate_of(own, [m for m in kept if not m.pending]) or own
    write.changed[memory.fragment_id] = memory.accepted(now).model_copy(update={
        "superseded_by": stands.fragment_id, "valid_to": memory.valid_to or now})
    return write


class _Kept:
    """Every memory (kept or written now, latest version), indexed for the comparisons a write makes."""

    def __init__(self, kept: Sequence[MemoryFragment]) -> None:
        self.kept_ids = {m.fragment_id for m in kept}
        self.by_id: dict[str, MemoryFragment] = {}
        self.index: dict[tuple[str, str], set[str]] = defaultdict(set)
        for memory in kept:
            self._add(memory)

    def _keys(self, memory: MemoryFragment) -> list[tuple[str, str]]:
        keys = [("statement", f"{memory.type}\x1f{evolve.norm(memory.content)}"),
                ("words", " ".join(content_stems(memory.content)))]
        if memory.key:
            keys.append(("subject", evolve.norm(memory.key)))
        keys += [("entity", e.lower()) for e in memory.entities]
        return keys

    def _add(self, memory: MemoryFragment) -> None:
        self.by_id[memory.fragment_id] = memory
        if memory.pending:  # known by id and by statement (not proposed twice), never compared with others
            self.index[self._proposal(memory)].add(memory.fragment_id)
            return
        for key in self._keys(memory):
            self.index[key].add(memory.fragment_id)

    def _find(self, keys: Sequence[tuple[str, str]]) -> list[MemoryFragment]:
        ids = sorted({i for key in keys for i in self.index.get(key, ())})
        return [self.by_id[i] for i in ids]

    def has(self, memory_id: str) -> bool:
        return memory_id in self.by_id

    def get(self, memory_id: str) -> MemoryFragment:
        return self.by_id[memory_id]

    def same_statement(self, memory: MemoryFragment) -> list[MemoryFragment]:
        return self._find(self._keys(memory)[:1])

    def rivals(self, memory: MemoryFragment) -> list[MemoryFragment]:
        """Those ``memory`` could close: facts of its subject, statements of its content words."""
        return self._find([k for k in self._keys(memory) if k[0] in ("subject", "words")])

    def related(self, memory: MemoryFragment) -> list[MemoryFragment]:
        return self._find([k for k in self._keys(memory) if k[0] in ("subject", "entity")])

    @staticmethod
    def _proposal(memory: MemoryFragment) -> tuple[str, str]:
        return ("proposal", f"{memory.type}\x1f{evolve.norm(memory.content)}")

    def same_proposal(self, memory: MemoryFragment) -> list[MemoryFragment]:
        """The pending memories from outside that say what ``memory`` says."""
        return self._find([self._proposal(memory)])

    def small(self) -> list[MemoryFragment]:
        return [m for m in self.by_id.values() if m.importance < evolve.CONSOLIDATE_BELOW and not m.pending]

    def put(self, memory: MemoryFragment, write: Write, *, new: bool = False) -> None:
        """Record a new memory or a rewrite (of a kept one: ``changed``; of a new one: in place)."""
        self._add(memory)
        if memory.fragment_id in self.kept_ids:
            write.changed[memory.fragment_id] = memory
        elif new:
            write.new.append(memory)
        else:
            write.new = [memory if m.fragment_id == memory.fragment_id else m for m in write.new]


