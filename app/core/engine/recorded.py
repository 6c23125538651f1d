"""What a rebuild feeds back instead of asking again: the observations of the outside a turn's
build made (replay, re-anchor; DESIGN.md §4 "Replay")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.context.retrieval import INDEX_CHANNELS, ChannelRun
from app.core.pipeline.detail import Detail
from app.core.pipeline.record import BuildRecord
from app.core.pipeline.summary_items import Offered, offer_from_record
from app.core.plan.tools import ToolSignals, ToolSpec
from app.core.tasks.stack import TaskInputs
from app.core.tools.model import ToolRound


@dataclass(frozen=True)
class Recorded:
    """Observations of the outside a rebuild feeds back instead of asking again (replay,
    re-anchor): index channel hits, the LLM's intent JSON, tool results and the tool filter's
    signals, the task stack, the
    branch summaries the build was offered; and the progressive detail the user set."""

    channels: Sequence[ChannelRun]
    llm: dict[str, Any] | None
    tool_specs: Sequence[ToolSpec] | None
    tools: ToolRound | None
    tasks: TaskInputs
    system_prompt: str = ""
    # Other sessions as the plan's recall scope saw them: 1 when it chose the workspace, else 0
    # (sessions created since must not flip it).
    other_sessions: int = 0
    summaries: Offered = field(default_factory=dict)
    detail: Detail = field(default_factory=Detail)  # the user's choice, not an observation, but recorded the same way
    tool_signals: ToolSignals = field(default_factory=ToolSignals)

    @classmethod
    def of(cls, b: BuildRecord) -> Recorded:
        """The observations of the recorded build ``b``."""
        return cls(channels=[run for run in b.recall.channels if run.channel in INDEX_CHANNELS],
                   llm=b.llm_intent, tool_specs=b.tool_specs, tools=b.tools,
                   tasks=TaskInputs.model_validate(b.tasks), system_prompt=b.system_prompt,
                   other_sessions=int(b.plan.get("retrieval", {}).get("scope") == "workspace"),
                   summaries=offer_from_record(b.summaries), detail=Detail.model_validate(b.detail),
                   tool_signals=b.tool_signals)
