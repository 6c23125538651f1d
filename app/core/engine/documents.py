"""Document parts in the engine: which parts of a read document are new, and their embeddings.

``DocumentParts.prepare(state, events, on_progress, cancel)`` runs before an env batch takes the
session lock: for each event that is a document (``payload["document"]``) or deletes one, it
plans its parts against the session's current part evidences (``app.core.session.documents``:
the same part keeps its evidence, a changed one is new, a vanished one is superseded) and embeds
only the new parts, a batch at a time, reporting ``{"stage": "indexing", "done", "total"}`` and
stopping with ``AttachCancelled`` when ``cancel`` is set — before anything is stored. The batch
then stores the parts with its events in one transaction and indexes them with these vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from app.core.engine.context import EngineContext
from app.core.errors import AttachCancelled
from app.core.ports import CancelToken, ReadProgress
from app.core.session.documents import PartPlan, document, is_part, part_index_text, part_note, plans_for
from app.core.session.state import SessionState
from app.core.types import EnvEvent, Evidence, utc_now

EMBED_BATCH = 32  # parts embedded per step: the step between two progress reports and cancel checks

Progress = ReadProgress  # {"stage", "done", "total", "unit"}


@dataclass
class PreparedParts:
    """The part plans of a batch by event id and the embeddings of the parts to add, by id."""

    plans: dict[str, PartPlan] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)

    def added(self, event_ids: Sequence[str], added_at: str) -> list[Evidence]:
        """The new part evidences of the given events, stamped with the time the batch is stored."""
        return [e.model_copy(update={"valid_from": added_at}) for eid in event_ids if eid in self.plans
                for e in self.plans[eid].add]

    def retired(self, event_ids: Sequence[str]) -> list[str]:
        return [pid for eid in event_ids if eid in self.plans for pid in self.plans[eid].retire]


class DocumentParts:
    """Plans and embeds the parts of the documents in an env batch (module doc)."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    async def prepare(self, state: SessionState, events: Sequence[EnvEvent], on_progress: Progress | None = None,
                      cancel: CancelToken | None = None) -> PreparedParts:
        if not any(document(e) is not None or (e.kind == "file" and e.payload.get("change") == "deleted")
                   for e in events):  # nothing to plan: no store read for a burst of plain files
            return PreparedParts()
        current = [e for e in await self.ctx.on_store(self.ctx.store.list_evidences, state.session_id) if is_part(e)]
        plans = plans_for(state.session_id, events, current, utc_now())
        new = [e for plan in plans.values() for e in plan.add]
        prepared = PreparedParts(plans)
        for start in range(0, len(new), EMBED_BATCH):
            if cancel is not None and cancel.cancelled:
                raise AttachCancelled("attaching was cancelled; nothing was recorded")
            batch = new[start:start + EMBED_BATCH]
            vectors = await self.ctx.embed([part_index_text(e) for e in batch])
            if vectors is not None:
                prepared.vectors.update(zip((e.evidence_id for e in batch), vectors))
            if on_progress is not None:
                on_progress({"stage": "indexing", "done": min(len(new), start + EMBED_BATCH), "total": len(new),
                             "unit": "parts"})
        if cancel is not None and cancel.cancelled:
            raise AttachCancelled("attaching was cancelled; nothing was recorded")
        return prepared

    async def index(self, session_id: str, added: list[Evidence], retired: list[str],
                    prepared: PreparedParts) -> str | None:
        """Index the stored new parts (with their embeddings) and drop the superseded ones from
        the index; None, or why it failed (one line: the parts are stored, the caller reports it)."""
        index = self.ctx.index
        if index is None:
            return None
        try:
            if added:
                vectors = [prepared.vectors.get(e.evidence_id) for e in added]
                known = None if any(v is None for v in vectors) else vectors
                await self.ctx.ex.run("embed", index.index_parts, session_id, added, known)
            if retired:
                await self.ctx.on_index(index.remove, retired)
        except Exception as exc:  # noqa: BLE001 - stored already: reported, never raised
            return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return None

    @staticmethod
    def apply(state: SessionState, added: list[Evidence], retired: list[str], at: str) -> None:
        """The session's recall notes follow: new parts added, superseded ones removed from ``at``."""
        for evidence in added:
            state.add_note(part_note(evidence))
        for pid in retired:
            note = state.notes.get(pid)
            if note is not None and not note.removed_at:
                state.add_note(replace(note, removed_at=at))
