"""What one memory write changes, decided in one place (pure): new memories, closings, link updates.

``plan_write(found, kept, now)`` takes the memories extracted from new evidence and every memory
already kept, and returns a ``Write``: the memories to store (each with its links), the kept ones
to rewrite (closed by a newer fact, or evolved by a new link), and the consolidations. Re-running
it on the same evidence writes nothing new (ids are derived from the evidence; a memory whose id
is kept, or that repeats a valid one, is skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.memory import evolve
from app.core.types import MemoryFragment


@dataclass(slots=True)
class Write:
    new: list[MemoryFragment] = field(default_factory=list)
    changed: dict[str, MemoryFragment] = field(default_factory=dict)  # rewritten kept memories, by id
    closed: list[tuple[str, str]] = field(default_factory=list)  # (closed id, the id that closed it)

    def __bool__(self) -> bool:
        return bool(self.new or self.changed)


def plan_write(found: Sequence[MemoryFragment], kept: Sequence[MemoryFragment], now: str) -> Write:
    """Decide the write for ``found`` against ``kept`` (see the module docstring)."""
    write = Write()
    by_id = {m.fragment_id: m for m in kept}
    for memory in found:
        current = [write.changed.get(m.fragment_id, m) for m in by_id.values()] + write.new
        if memory.fragment_id in by_id or any(m.fragment_id == memory.fragment_id for m in write.new):
            continue
        if evolve.duplicate_of(memory, current) is not None:
            continue
        replaced: list[dict[str, str]] = []
        for old in evolve.closes(memory, current):
            closed = old.model_copy(update={"valid_to": memory.valid_from, "closed_at": now,
                                            "superseded_by": memory.fragment_id})
            _keep(write, by_id, closed)
            write.closed.append((old.fragment_id, memory.fragment_id))
            replaced.append({"memory_id": old.fragment_id, "reason": f"replaces an earlier {old.type}: {old.content}"})
        current = [write.changed.get(m.fragment_id, m) for m in by_id.values()] + write.new
        links = evolve.links(memory, current)
        memory = memory.model_copy(update={"links": replaced + links})
        for link in links:
            neighbour = next(m for m in current if m.fragment_id == link["memory_id"])
            evolved = evolve.evolve(neighbour, memory, link["reason"], now)
            if evolved is not None:
                _keep(write, by_id, evolved)
        write.new.append(memory)
    current = [write.changed.get(m.fragment_id, m) for m in by_id.values()] + write.new
    for note, members in evolve.consolidate(current, now):
        if note.fragment_id in by_id:
            continue
        write.new.append(note)
        for member in members:
            _keep(write, by_id, member.model_copy(update={"valid_to": now, "superseded_by": note.fragment_id}))
    return write


def _keep(write: Write, by_id: dict[str, MemoryFragment], memory: MemoryFragment) -> None:
    """Record a rewrite: of a kept memory (``changed``) or of one this write adds."""
    if memory.fragment_id in by_id:
        write.changed[memory.fragment_id] = memory
    else:
        write.new = [memory if m.fragment_id == memory.fragment_id else m for m in write.new]
