"""A scripted chat model for the resident agent's tests: it plans, works on steps and answers.

- asked for JSON (a task's plan): the plan it was given, as JSON (or text that fails the check);
- asked about a running task (an interruption): a short answer;
- otherwise (a step, a task): "Done: <the current task's name>." then, for each constraint and each
  change the context shows, a sentence carrying its words, then ``words`` filler words. It reads
  only what the prompt holds, so whatever reaches a result went through the step's context.

It streams word by word, honours the stop token and the answer length like ``ScriptedChatModel``,
and records each call's kind, so a test can count them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from app.core.ports import CancelToken, ChatMessage, ChatResult, GenerationParams, TokenCallback
from app.llm.fakes import ScriptedChatModel

_CURRENT = re.compile(r"Current task: (.+?) \((?:pending|active|blocked)\)")
_CONSTRAINT = re.compile(r"Constraint: (.+)")
_FIGURE = re.compile(r"\bfigure[s]?\b[^\n]*?(\d[\d.,]*)", re.IGNORECASE)

PLAN = {"steps": [
    {"name": "Choose the venue and the dates", "acceptance": "a venue and two dates are named", "depends_on": []},
    {"name": "Draft the agenda of both days", "acceptance": "each day has a timed agenda", "depends_on": [1]},
    {"name": "List what to book and who books it", "acceptance": "every booking has an owner", "depends_on": [1]},
]}


class AgentModel(ScriptedChatModel):
    """See the module doc. ``plan``: the JSON a planning call gets (a str is sent as it is);
    ``fail``: names of steps whose runs end in an error (before any token), each time."""

    def __init__(self, *, plan: Any = PLAN, words: int = 40, delay: float = 0.0, fail: Sequence[str] = ()) -> None:
        super().__init__(token_delay_s=delay)
        self.plan, self.words, self.fail = plan, words, tuple(fail)
        self.kinds: list[str] = []

    def reply(self, messages: Sequence[ChatMessage], json_schema: dict[str, Any] | None) -> tuple[str, str]:
        user = "\n".join(m["content"] for m in messages)  # the context is the system message
        if json_schema is not None:
            return "plan", self.plan if isinstance(self.plan, str) else json.dumps(self.plan)
        if "Running task:" in user or messages[-1]["content"].rstrip().endswith("?"):
            return "answer", "The task is going well."
        current = _CURRENT.findall(user)
        name = current[-1] if current else "the task"
        parts = [f"Done: {name}."]
        parts += [f"As asked: {c.strip()}." for c in _CONSTRAINT.findall(user)]
        parts += [f"The new figure is {f}." for f in _FIGURE.findall(user.split("Changed meanwhile:", 1)[-1])
                  ] if "Changed meanwhile:" in user else []
        parts += [f"w{i}" for i in range(self.words)]
        return ("fail" if any(f in name for f in self.fail) else "step"), " ".join(parts)

    def chat(self, messages: Sequence[ChatMessage], *, params: GenerationParams | None = None, stage: str = "answer",
             json_schema: dict[str, Any] | None = None, on_token: TokenCallback | None = None,
             cancel: CancelToken | None = None) -> ChatResult:
        kind, text = self.reply(messages, json_schema)
        self.kinds.append(kind)
        if kind == "fail":
            self._replies, self._next = [""], 0
            result = super().chat(messages, params=params, stage=stage, on_token=None, cancel=cancel)
            return result.model_copy(update={"finish_reason": "error", "text": ""})
        self._replies, self._next = [text], 0
        return super().chat(messages, params=params, stage=stage, json_schema=json_schema, on_token=on_token,
                            cancel=cancel)
