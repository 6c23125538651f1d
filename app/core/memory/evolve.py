"""How a new memory changes the ones already kept: closing, linking, evolving, consolidating.

Pure functions over ``MemoryFragment`` values; the engine's memory service applies what they
return to the store. Nothing is deleted: a memory a newer one contradicts is *closed* (``valid_to``
= when the new one became true, ``superseded_by`` = its id), so "what was X before?" still finds it.

- ``closes``: a fact with the same subject key and another value closes the older fact (Zep's
  bi-temporal edge invalidation); a prohibition closes a permission of the same content words and
  vice versa; a preference is never closed by another (people have many).
- ``duplicate_of``: the same statement already kept and valid (the new one is not stored).
- ``links``: A-Mem links with a stated reason — a shared entity, the same fact subject, or an
  embedding similarity above ``LINK_SIMILARITY``.
- ``evolve``: a linked neighbour gains the shared entities as tags; its earlier tags go into
  ``revisions`` (a new revision, not an overwrite).
- ``consolidate``: many low-importance memories about one entity become one note that supersedes
  them.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from app.core.errors import MemoryChanged
from app.core.text.words import content_stems
from app.core.types import MemoryFragment, utc_now

LINK_SIMILARITY = 0.75  # cosine of two memories' embeddings above which they are linked
MAX_LINKS = 5  # links a new memory gets (the strongest reasons first)
CONSOLIDATE_MIN = 5  # low-importance memories about one entity before they are merged into a note
CONSOLIDATE_BELOW = 0.5  # importance under which a memory may be consolidated
_OPPOSITE = {"prohibition": "permission", "permission": "prohibition"}


def norm(text: str) -> str:
    """A statement's words for comparison: lower case, single spaces, no closing punctuation."""
    return " ".join(text.lower().strip(" .!\"'").split())


def is_valid(memory: MemoryFragment) -> bool:
    """Still true and not revoked."""
    return memory.valid_to is None and memory.revoked_at is None


def revoked(memory: MemoryFragment, at: str | None = None) -> MemoryFragment:
    """The memory revoked by the user at ``at``: closed (if still valid) and marked, never deleted."""
    at = at or utc_now()
    return memory.model_copy(update={"revoked_at": at, "valid_to": memory.valid_to or at})


def edited(memory: MemoryFragment, content: str, at: str) -> list[MemoryFragment]:
    """The user's edit: [the memory, replaced (revoked, pointing at its successor), the new
    version (a memory of its own, the earlier words in its ``revisions``)]."""
    new = memory.model_copy(update={
        "fragment_id": "mem-" + hashlib.sha1(f"{memory.fragment_id}\x1f{at}\x1f{content}".encode()).hexdigest()[:20],
        "content": content.strip(), "extractor": "user", "recorded_at": at, "valid_from": at,
        "revisions": [*memory.revisions, {"at": at, "content": memory.content, "memory_id": memory.fragment_id}]})
    old = revoked(memory, at).model_copy(update={"superseded_by": new.fragment_id})
    return [old, new]


def still_valid(memory: MemoryFragment) -> MemoryFragment:
    """``memory``, when the user may still edit it; ``MemoryChanged`` when it was revoked or edited
    meanwhile (by another window or process: the edit is decided on the memory as stored now)."""
    if memory.revoked_at is not None:
        raise MemoryChanged(f"memory {memory.fragment_id} was revoked or edited meanwhile; nothing was changed")
    return memory


def as_users_statement(memory: MemoryFragment, at: str) -> MemoryFragment:
    """A memory from outside that the user accepts, as the user's own statement made at ``at``: a
    memory added by hand (extractor "user", workspace scope, no source evidence: said in no
    session), whose ``revisions`` name the memory it came from."""
    return memory.model_copy(update={
        "fragment_id": "mem-" + hashlib.sha1(f"{memory.fragment_id}\x1faccepted\x1f{at}".encode()).hexdigest()[:20],
        "context": f"{memory.type} accepted by the user from {'an import' if memory.origin == 'imported' else 'an agent'}",
        "extractor": "user", "scope": "workspace", "source_evidence_ids": [], "links": [], "recorded_at": at,
        "valid_from": at, "valid_to": None, "closed_at": None, "superseded_by": None, "revoked_at": None,
        "revisions": [*memory.revisions, {"at": at, "accepted": memory.fragment_id}]}).with_origin("")


def duplicate_of(new: MemoryFragment, kept: Iterable[MemoryFragment]) -> MemoryFragment | None:
    """A valid memory that says the same thing as ``new`` (same type, same words), or None."""
    key = (new.type, norm(new.content))
    return next((m for m in kept if is_valid(m) and (m.type, norm(m.content)) == key
                 and m.fragment_id != new.fragment_id), None)


def closes(new: MemoryFragment, kept: Iterable[MemoryFragment]) -> list[MemoryFragment]:
    """The valid memories ``new`` contradicts and closes (older ones only)."""
    out: list[MemoryFragment] = []
    for old in kept:
        if not is_valid(old) or old.fragment_id == new.fragment_id or old.valid_from > new.valid_from:
            continue
        if new.type == "fact" and old.type == "fact" and new.key and norm(old.key) == norm(new.key):
            if norm(old.value) != norm(new.value):
                out.append(old)
        elif _OPPOSITE.get(new.type) == old.type and content_stems(old.content) == content_stems(new.content):
            out.append(old)
    return out


def links(new: MemoryFragment, kept: Iterable[MemoryFragment],
          similarity: Mapping[str, float] | None = None) -> list[dict[str, str]]:
    """Links from ``new`` to related valid memories, each with its reason, strongest first."""
    sims = similarity or {}
    mine = {e.lower() for e in new.entities}
    found: list[tuple[int, float, dict[str, str]]] = []
    seen = {new.fragment_id}
    for old in kept:
        if not is_valid(old) or old.fragment_id in seen:
            continue
        seen.add(old.fragment_id)
        shared = sorted(mine & {e.lower() for e in old.entities})
        sim = sims.get(old.fragment_id, 0.0)
        if new.key and norm(new.key) == norm(old.key):
            found.append((0, -sim, {"memory_id": old.fragment_id, "reason": f"same subject: {new.key}"}))
        elif shared:
            found.append((1, -sim, {"memory_id": old.fragment_id, "reason": "shared entity: " + ", ".join(shared)}))
        elif sim >= LINK_SIMILARITY:
            found.append((2, -sim, {"memory_id": old.fragment_id, "reason": f"similar ({sim:.2f})"}))
    found.sort(key=lambda f: (f[0], f[1]))
    return [link for _, _, link in found[:MAX_LINKS]]


def evolve(neighbour: MemoryFragment, new: MemoryFragment, reason: str, at: str) -> MemoryFragment | None:
    """The neighbour's next revision after ``new`` links to it: the shared entities join its tags
    and the link is kept on both sides. None when nothing would change."""
    shared = {e.lower() for e in new.entities} & {e.lower() for e in neighbour.entities}
    tags = sorted(set(neighbour.tags) | shared)
    back = {"memory_id": new.fragment_id, "reason": reason}
    if tags == neighbour.tags and back in neighbour.links:
        return None
    revisions = [*neighbour.revisions, {"at": at, "tags": neighbour.tags, "context": neighbour.context,
                                        "because": new.fragment_id}]
    return neighbour.model_copy(update={"tags": tags, "links": [*neighbour.links, back], "revisions": revisions})


def consolidate(kept: Sequence[MemoryFragment], at: str) -> list[tuple[MemoryFragment, list[MemoryFragment]]]:
    """Notes that merge many low-importance memories about one entity: (the note, what it supersedes).

    A memory takes part once (under its first entity); pinned memories are left as they are.
    """
    groups: dict[str, list[MemoryFragment]] = defaultdict(list)
    for memory in kept:
        if (is_valid(memory) and not memory.pinned and memory.importance < CONSOLIDATE_BELOW
                and memory.type in ("note", "event") and memory.entities):
            groups[memory.entities[0].lower()].append(memory)
    out: list[tuple[MemoryFragment, list[MemoryFragment]]] = []
    for entity, members in sorted(groups.items()):
        if len(members) < CONSOLIDATE_MIN:
            continue
        members = sorted(members, key=lambda m: (m.valid_from, m.fragment_id))
        name = members[0].entities[0]
        sources = list(dict.fromkeys(e for m in members for e in m.source_evidence_ids))
        note = MemoryFragment(
            fragment_id="mem-note-" + members[0].fragment_id.removeprefix("mem-"),
            content=f"About {name}: " + "; ".join(m.content for m in members),
            context=f"consolidated from {len(members)} memories about {name}",
            type="note", importance=0.6, source_evidence_ids=sources, entities=[name],
            tags=sorted({"consolidated", entity}), scope=members[0].scope,
            keywords=list(dict.fromkeys(k for m in members for k in m.keywords))[:16],
            links=[{"memory_id": m.fragment_id, "reason": "consolidated"} for m in members],
            valid_from=members[0].valid_from, recorded_at=at, extractor="consolidation",
        )
        out.append((note, members))
    return out
