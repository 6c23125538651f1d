"""How long an answer may be, and how a cut one goes on.

An answer's token limit is the answer reserve its plan left in the model's context
(``EngineConfig.answer_reserve``: a quarter of the context by default; a session's own answer
length, bounded by half the context, replaces it — ``TurnService._session_limits``), so the
prompt and the answer always fit the model together. An answer that reaches it ends with
``finish_reason == "length"``; a turn on it whose input is ``CONTINUE_TEXT`` asks for the rest.
"""

from __future__ import annotations

from app.core.pipeline.record import BuildRecord
from app.core.ports import GenerationParams
from app.core.session.state import SessionState

#: The input of a turn that continues an answer cut at its length limit (the desktop's "Continue
#: the answer", the line ``pcm ask`` prints): answered on the cut turn, whose answer it then sees.
CONTINUE_TEXT = "Continue your last answer exactly where it stopped."


def answer_params(state: SessionState, build: BuildRecord, base: GenerationParams) -> GenerationParams:
    """The answer's sampling parameters: the session's, with its length limit the answer reserve
    the plan left in the model's context (the session's own answer length, when set, is what the
    plan reserved)."""
    params = state.generation.params(base)
    reserve = int(build.plan.get("budget", {}).get("answer_reserve") or 0)
    return params.model_copy(update={"max_tokens": reserve}) if reserve > 0 else params
