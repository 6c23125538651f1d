"""One context build: intent → plan → anchor routing → recall → compile (everything but generation).

``ContextBuilder.build`` is what a turn, an evaluation question, an environment push and a replay
all run. It reads the session state as of that moment, the caller's request and, through one
interface, everything else (``pipeline/sources.py``: the query vector, the vectors of the anchor
candidates, the task stack, the LLM's intent JSON, the tools, the branch summaries, ...), once,
into ``BuildInputs``; its output is a ``BuildRecord`` that says what was decided and why. All the
decisions are pure functions of those inputs; what was an observation of the outside (the index
channels, the model's JSON, tool results, ...) a replay's sources feed back as recorded. The
builder orchestrates: the stages are intent (``intent/``), plan (``plan/``), routing
(``routing/``), recall (``context/retrieval.py``), the tasks' frame (``tasks/``), and the
prompt, compiled in one call into ``context/prompt.py``.

An evaluation's ablations (``BuildInputs.ablate``, ``app.core.types.Ablation``) close a mechanism
each: here anchor routing (the input continues the latest turn), the relevance gate (threshold 0),
the environment channel (no env event reaches recall or the intent) and the memory and topic
channels (asked for nothing); the prompt compiler closes the others.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Literal, NamedTuple, cast

import numpy as np

from app.core.context.compiler import Item
from app.core.context.prompt import SYSTEM_INSTRUCTION, CompiledPrompt, PromptCompiler, PromptSections
from app.core.context.retrieval import PCM_FUSION, RecallRequest, RecallResult, recall
from app.core.context.runner import EarlyText
from app.core.context.sections.tools import clip
from app.core.intent.dependence import states
from app.core.intent.engine import IntentEngine
from app.core.intent.model import Intent, IntentContext, Mode, RecentTurn, RunningTask
from app.core.pipeline.record import BuildRecord, StageTiming
from app.core.pipeline.sources import BuildInputs, BuildRequest, BuildSources, ToolStep
from app.core.pipeline.summary_items import history, recorded_offer
from app.core.plan.builder import PlanBuilder, PlanContext, PlanResult
from app.core.plan.model import ContextPlan
from app.core.ports import TokenCounter
from app.core.routing.anchor import (
    AnchorCandidate,
    AnchorRouter,
    RoutingDecision,
    mention,
)
from app.core.routing.candidates import Place, anchor_candidates
from app.core.routing.env_anchor import env_branch, env_nodes
from app.core.session.membership import RoutedShares, routed_shares
from app.core.session.state import NoteView, SessionState
from app.core.tasks.stack import StackDecision, TaskInputs, decide, decision_view, popped
from app.core.tools.model import ToolRound
from app.core.types import Ablation, BlockType, NodeKind, Priority, Role

LlmStatus = Literal["skipped", "ok", "invalid", "late", "error"]  # IntentContext.llm_status
#: ``BuildRequest.anchor_override`` value that forces a new task root (``None`` = route normally).
NEW_ROOT = ""


class Built(NamedTuple):
    """A build: its record, its stage timings, and the notes its workspace recall read from other
    sessions (the engine adds them to the session state: nothing called during a build writes to it)."""

    record: BuildRecord
    timing: StageTiming
    outside: list[NoteView]


class ContextBuilder:
    """Runs the deterministic pipeline for one input over one session state."""

    def __init__(
        self,
        *,
        intents: IntentEngine,
        planner: PlanBuilder,
        router: AnchorRouter,
        counter: TokenCounter,
        answer_reserve: int = 256,
        context_size: int = 2048,
        candidate_turns: int = 12,
        system_instruction: str = SYSTEM_INSTRUCTION,
    ) -> None:
        self.intents = intents
        self.planner = planner
        self.router = router
        self.counter = counter
        self.prompt = PromptCompiler(counter, system_instruction)
        self.answer_reserve = answer_reserve
        self.context_size = context_size
        self.candidate_turns = candidate_turns

    # ------------------------------------------------------------------ stages

    @staticmethod
    def focus_task(state: SessionState, inp: BuildInputs) -> str | None:
        """The task the user chose on the canvas (a focused task node), if any."""
        if inp.focus_chosen and inp.focus_node is not None and inp.focus_node in state.graph:
            node = state.graph.node(inp.focus_node)
            if node.kind == NodeKind.TASK:
                return node.ref_id
        return None

    def stack_decision(self, state: SessionState, inp: BuildInputs, intent: Intent, anchor: str | None) -> StackDecision:
        """Which frame of the task stack the build works in (``app.core.tasks.stack.decide``)."""
        chain = state.main_chain(anchor, 50) if anchor is not None and anchor in state.graph else []
        turns = [ref for ref in (state.graph.node(n).ref_id for n in chain) if ref]
        return decide(inp.tasks, mode=intent.mode.value, chain_turns=turns, goal=intent.goal or inp.text,
                      acceptance=intent.acceptance, target=intent.hint("target_task"))

    def infer_intent(self, state: SessionState, inp: BuildInputs) -> Intent:
        recent = [
            RecentTurn(text=state.messages[m].text, mode="")
            for m in state.recent(6)
            if state.messages[m].role == Role.USER
        ][-3:]
        ctx = IntentContext(
            query_vector=list(inp.query_vector) if inp.query_vector is not None else None,
            recent_turns=recent,
            profile=inp.profile,
            llm_output=inp.llm_output,
            llm_status=cast(LlmStatus, inp.llm_status),
            trigger="env" if inp.trigger == "env" else "user",
            recent_env_events=list(inp.env_events),
            running_tasks=running_tasks(inp.tasks),
            focus_task=self.focus_task(state, inp),
        )
        return self.intents.infer(inp.reading or inp.text, ctx)

    def anchor_candidates(self, state: SessionState, inp: BuildInputs, vectors: Mapping[str, Sequence[float] | np.ndarray],
                          intent: Intent) -> list[AnchorCandidate]:
        """Branch frontiers plus the most recent turns, with their routing features (the intent's
        entities, target task and reading of the input's place in the conversation among them)."""
        target = intent.hint("target_task")
        task_of_turn = {t.turn_id: t.task_id for t in inp.tasks.tasks if t.turn_id is not None} if target else {}
        place = Place(follow_up=intent.dependence, topic_shift=intent.topic_shift, statement=states(inp.text),
                      request=intent.mode == Mode.TASK)
        return anchor_candidates(state, vectors, text=inp.text, at=inp.at, query_vector=inp.query_vector,
                                 focus_node=inp.focus_node, focus_chosen=inp.focus_chosen, overrides=inp.overrides,
                                 exclude_ids=inp.exclude_ids, task_of_turn=task_of_turn,
                                 intent_entities=intent.entities, intent_target=target,
                                 candidate_turns=self.candidate_turns, place=place, tasks=inp.tasks.tasks)

    def recall_request(self, state: SessionState, inp: BuildInputs, intent: Intent, plan: ContextPlan,
                       anchor: str | None) -> RecallRequest:
        named = {e.lower() for e in intent.entities} | {a.lower() for a in plan.retrieval.filters.authors}
        speakers = [s for s in state.speakers() if s.lower() in named or mention(inp.text, s)]
        dates, routed = plan.retrieval.date_range, inp.routed or RoutedShares()
        return RecallRequest(
            query=inp.text,
            channel_sizes={c: 0 if c in inp.ablate else n for c, n in plan.retrieval.channels.items()},
            speakers=speakers,
            anchor_node=anchor,
            chain_turns=plan.history.main_chain_turns,
            top_k=plan.rerank.top_k,
            dedup_threshold=plan.rerank.dedup_threshold,
            mmr_lambda=plan.rerank.mmr_lambda,
            exclude_ids=list(inp.exclude_ids),
            strategy=PCM_FUSION.name,
            kinds=list(plan.retrieval.filters.kinds),
            now=inp.at,
            since=dates.start if dates else "",
            until=dates.end if dates else "",
            date_mode=dates.mode if dates else "",
            scope=plan.retrieval.scope,
            candidate_pool=plan.retrieval.candidate_pool,
            per_channel_cap=plan.rerank.per_channel_cap,
            # "deadlines" ablated (evaluations): every channel is waited for, whatever the machine's load
            timeout_ms=0 if Ablation.DEADLINES in inp.ablate else plan.budget.timeouts_ms.get("recall", 0),
            relevance_threshold=plan.rerank.relevance_threshold,
            sub_questions=list(plan.sub_questions),
            asks_time=plan.retrieval.time.asks, time_relation=plan.retrieval.time.relation,
            alternatives=list(routed.alternatives), routed=routed.judged, tuning=dict(inp.tuning),
        )

    @staticmethod
    def item_cap(plan: ContextPlan) -> int:
        """The most one recalled or tool evidence may take before it is compressed: half the
        evidence quota (at least 64 tokens)."""
        return max(64, plan.budget.segments.get("evidence", 0) // 2)

    # ------------------------------------------------------------------ the build

    async def build(self, state: SessionState, request: BuildRequest, sources: BuildSources) -> Built:
        """Run every stage for ``request`` on ``state``, reading everything else from ``sources``
        (the engine's now, or a recorded build's: replay). The model limits are the sources'
        (replay rebuilds with those the turn was built under), else the builder's. The turn's
        tools run alongside recall; their results enter the context as labelled evidence and the
        round is recorded in ``BuildRecord.tools``. The input's full-text query starts as soon as
        the inputs are read (``early_text``). Nothing is written to ``state``: the notes
        workspace recall read from other sessions are returned (``Built.outside``)."""
        timing = StageTiming()
        limits = sources.limits(state)
        context_size, answer_reserve = limits if limits is not None else (self.context_size, self.answer_reserve)
        read = await self.inputs(state, request, sources, timing)
        early = self.early_text(state, request, sources)
        try:
            return await self._stages(state, request, sources, timing, (context_size, answer_reserve), read, early)
        finally:
            if early is not None:
                early.drop()

    @staticmethod
    def early_text(state: SessionState, request: BuildRequest, sources: BuildSources) -> EarlyText | None:
        """The input's full-text query, started once the inputs are read (the query embedded), so it
        runs on the index's threads while the intent, the plan and routing run here (live builds
        with an index only: replay reads its runs from the record). See ``runner.EarlyText``.
        Not beside the embedding: on two cores the query's threads slowed the embedding's."""
        index = sources.index
        if index is None or sources.channels() or not request.text.strip():
            return None
        return EarlyText.start(index, sources.run_blocking, request.text, state.session_id)

    async def _stages(self, state: SessionState, request: BuildRequest, sources: BuildSources, timing: StageTiming,
                      limits: tuple[int, int], read: tuple[BuildInputs, Mapping[str, Sequence[float] | np.ndarray],
                                                          ToolStep | None], early: EarlyText | None) -> Built:
        """The stages after the inputs are read: intent, plan, routing, recall (with the turn's
        tools), compilation, and the record."""
        context_size, answer_reserve = limits
        inp, vectors, tool_step = read
        inp = closed(state, inp) if inp.ablate else inp
        t0 = time.perf_counter()
        intent = self.infer_intent(state, inp)
        t1 = time.perf_counter()
        result = self.planner.build(
            intent,
            PlanContext(total_budget=inp.budget, tools=list(inp.tools), tool_signals=inp.tool_signals, profile=inp.profile,
                        answer_reserve=answer_reserve, context_size=context_size,
                        running_tasks=[t.name for t in inp.tasks.running()], now=inp.at,
                        session_turns=len(state.turn_order), other_sessions=inp.other_sessions,
                        agent_run=inp.tasks.run is not None),
        )
        plan = ungated(result.plan) if Ablation.GATE in inp.ablate else result.plan
        t2 = time.perf_counter()
        decision, anchor, stack, inp = self.route(state, inp, intent, vectors)
        t3 = time.perf_counter()
        req = self.recall_request(state, inp, intent, plan, anchor)
        recalled, outside, tool_round = await self.recall_and_tools(state, inp, intent, plan, req, timing,
                                                                    sources=sources, vectors=vectors,
                                                                    tool_step=tool_step, early=early)
        state = state.with_notes(outside) if outside else state  # what recall read, the prompt shows
        t4 = time.perf_counter()
        limit = max(0, context_size - answer_reserve)
        prompt = self.prompt.compile(state, self.sections(state, inp, intent, plan, anchor, recalled, stack, tool_round,
                                                          budget=min(inp.budget, limit), limit=limit))
        t5 = time.perf_counter()
        read_ms = timing.intent_ms
        timing.intent_ms = read_ms + (t1 - t0) * 1000
        timing.plan_ms = (t2 - t1) * 1000
        timing.route_ms = (t3 - t2) * 1000
        timing.recall_ms = (t4 - t3) * 1000
        timing.compile_ms = (t5 - t4) * 1000
        timing.build_ms = (t5 - t0) * 1000 + timing.embed_ms + read_ms
        record = self.record(inp, intent, result, decision, anchor, req, recalled, prompt, tool_round, stack)
        record.compressed, record.required = prompt.compressions, prompt.required
        record.summaries = recorded_offer(state, [anchor, inp.detail.focus], inp.summaries)
        record.excluded = list(request.exclude_ids)
        return Built(record, timing, outside)

    async def inputs(self, state: SessionState, request: BuildRequest, sources: BuildSources, timing: StageTiming,
                     ) -> tuple[BuildInputs, Mapping[str, Sequence[float] | np.ndarray], ToolStep | None]:
        """What the build reads, each source asked once: the inputs, the recent turns' vectors (for
        routing) and the step that runs the turn's tools. ``timing.embed_ms``: the query's embedding;
        ``timing.intent_ms``: reading the text (the intent stage's first part)."""
        started = time.perf_counter()
        given = request.query_vector if request.query_vector is not None else await sources.query_vector(request.text)
        timing.embed_ms = (time.perf_counter() - started) * 1000
        qv = None if given is None else [float(x) for x in given]
        vectors = await sources.vectors(self.routed_ids(state))
        tasks = await sources.tasks(state)
        started = time.perf_counter()
        reading = request.reading or self.intents.read(request.text)  # the fast intent's text, read once
        timing.intent_ms = (time.perf_counter() - started) * 1000  # (the intent stage adds its own)
        llm_output, llm_status = await sources.llm_intent(request.text, lambda: self.intents.infer(
            reading, IntentContext(query_vector=qv, running_tasks=running_tasks(tasks))))
        specs, tool_step = sources.tools()
        inp = BuildInputs.of(
            request, query_vector=qv, reading=reading, profile=sources.profile(state), facts=sources.facts(state),
            overrides=sources.overrides(state), tools=specs, tool_signals=await sources.tool_signals(state, qv),
            tasks=tasks, llm_output=llm_output, llm_status=llm_status,
            system_prompt=sources.system_prompt(state), other_sessions=sources.other_sessions(state),
            ablate=sources.ablate(), tuning=sources.tuning(), summaries=sources.summaries(state),
            detail=sources.detail())
        return inp, vectors, tool_step

    def routed_ids(self, state: SessionState) -> list[str]:
        """The messages of the recent turns and the env events that routing compares an input with
        (their vectors are read for every build)."""
        turns = state.turn_order[-self.candidate_turns * 2:]
        events = [note.note_id for _, note in env_nodes(state, self.candidate_turns)]  # ENV nodes route too
        return [m for tid in turns for m in state.turns[tid].message_ids] + events

    @staticmethod
    def record(inp: BuildInputs, intent: Intent, result: PlanResult, decision: RoutingDecision, anchor: str | None,
               req: RecallRequest, recalled: RecallResult, prompt: CompiledPrompt, tool_round: ToolRound | None,
               stack: StackDecision) -> BuildRecord:
        """The build's record: what every stage decided, as JSON-ready data."""
        return BuildRecord(
            text=inp.text,
            detail=inp.detail.model_dump(mode="json") if inp.detail.actions else {},
            at=inp.at,
            budget=inp.budget,
            intent=intent.model_dump(mode="json"),
            plan=result.plan.model_dump(mode="json"),
            plan_candidates=[c.model_dump(mode="json") for c in result.candidates],
            routing=decision.model_dump(mode="json") | {
                "override": inp.anchor_override, "focus": inp.focus_node, "focus_chosen": inp.focus_chosen,
                "shares": inp.routed.model_dump(mode="json") if inp.routed else None},
            anchor_node=anchor,
            recall_request=req.model_dump(mode="json"),
            recall=recalled,
            context=prompt.compiled,
            prompt=prompt.prompt,
            input=prompt.charge,
            tool_specs=list(inp.tools), tool_signals=inp.tool_signals, tools=tool_round,
            tasks=inp.tasks.model_dump(mode="json") if inp.tasks.tasks or inp.tasks.new_task_id else {},
            task=stack.model_dump(mode="json") if stack.current is not None else {},
            system_prompt=inp.system_prompt,
            llm_intent={"output": inp.llm_output, "status": inp.llm_status},
        )

    def route(self, state: SessionState, inp: BuildInputs, intent: Intent,
              vectors: Mapping[str, Sequence[float] | np.ndarray]) -> tuple[RoutingDecision, str | None, StackDecision, BuildInputs]:
        """The anchor (the router's, or the user's override), the task-stack frame, and the inputs
        with routing's shares over trees and the answers of popped subtasks excluded from recall."""
        candidates = self.anchor_candidates(state, inp, vectors, intent)
        decision: RoutingDecision = self.router.route(candidates)
        anchor = decision.anchor_id if not decision.new_root else None
        if inp.anchor_override is not None:
            anchor = inp.anchor_override or None  # NEW_ROOT forces a root
        elif anchor is not None and state.graph.node(anchor).kind == NodeKind.ENV:
            inp = self.pin_event(state, inp, anchor)
            anchor = env_branch(state, anchor, inp.tasks.tasks)
        stack = self.stack_decision(state, inp, intent, anchor)
        if inp.routed is None:
            # an ENV node stands for the branch its event belongs to
            branch = {c.node_id: env_branch(state, c.node_id, inp.tasks.tasks) for c in decision.candidates
                      if c.node_id in state.graph and state.graph.node(c.node_id).kind == NodeKind.ENV}
            routed = RoutedShares() if inp.anchor_override is not None else routed_shares(
                ((branch.get(c.node_id, c.node_id), c.score) for c in decision.candidates if c.node_id in state.graph),
                anchor, state.graph.root_of, self.router.weights.tau_new)
            inp = replace(inp, routed=routed)
        # Popped subtasks stand in the context by their result only: their answers are not recalled.
        turns = [turn for t in popped(inp.tasks, stack) for turn in (t.turn_id, *t.runs) if turn in state.turns]
        answers = [m for turn in dict.fromkeys(turns) for m in state.turns[turn].message_ids
                   if state.messages[m].role == Role.ASSISTANT]
        if answers:
            inp = replace(inp, exclude_ids=(*inp.exclude_ids, *answers))
        return decision, anchor, stack, inp

    def pin_event(self, state: SessionState, inp: BuildInputs, env_node: str) -> BuildInputs:
        """The inputs of a build routed to an ENV node: the event's note pinned as evidence (a
        third of the budget at most), kept out of recall (it is there already)."""
        event_id = state.graph.node(env_node).ref_id or ""
        note = state.notes[event_id]
        item = Item(event_id, BlockType.EVIDENCE, clip(note.text, max(48, inp.budget // 3), self.counter),
                    Priority.MUST, score=1.0, order=-1, evidence_ids=(event_id,))
        return replace(inp, pinned=(*inp.pinned, item), exclude_ids=(*inp.exclude_ids, event_id))

    async def recall_and_tools(
        self, state: SessionState, inp: BuildInputs, intent: Intent, plan: ContextPlan, req: RecallRequest,
        timing: StageTiming, *, sources: BuildSources, vectors: Mapping[str, Sequence[float] | np.ndarray],
        tool_step: ToolStep | None, early: EarlyText | None = None,
    ) -> tuple[RecallResult, list[NoteView], ToolRound | None]:
        """Recall (the index channels the sources recorded are used as observed, the others run;
        with the notes it read from other sessions) and the turn's tool round, run concurrently
        (``timing.tools_ms`` is the tools'); ``early``: the input's full-text query, started with the build."""
        known_sem = query_cosines(inp.query_vector, {k: v for k, v in vectors.items() if k not in state.notes})

        async def run_recall() -> tuple[RecallResult, list[NoteView]]:
            return await recall(state, req, query_vector=inp.query_vector, search=sources.index,
                                run_blocking=sources.run_blocking, recorded=sources.channels(), known_sem=known_sem,
                                outside=partial(sources.outside_notes, state), topics=sources.topics(),
                                embed=sources.query_vector, early=early)

        async def run_tools() -> ToolRound | None:
            started = time.perf_counter()
            try:
                return await tool_step(state, inp, intent, plan) if tool_step is not None else None
            finally:
                timing.tools_ms = (time.perf_counter() - started) * 1000

        # The plan (and its tool policy) is fixed before any tool runs: nothing a tool returns can change it.
        (recalled, outside), tool_round = await asyncio.gather(run_recall(), run_tools())
        return recalled, outside, tool_round

    def sections(
        self, state: SessionState, inp: BuildInputs, intent: Intent, plan: ContextPlan, anchor: str | None,
        recalled: RecallResult, stack: StackDecision, tool_round: ToolRound | None, *, budget: int, limit: int,
    ) -> PromptSections:
        """What the prompt is made from: the stages' results as each section of the prompt reads them."""
        return PromptSections(
            text=inp.text, input_id=inp.input_id, at=inp.at, system_prompt=inp.system_prompt, profile=inp.profile,
            intent=intent, clarification=plan.clarification_question if plan.needs_clarification else None,
            facts=inp.facts, history=history(state, anchor, plan, inp.summaries, inp.detail, inp.exclude_ids),
            recalled=recalled, evidence_cap=self.item_cap(plan), evidence_priority=plan.rerank.evidence_priority,
            tasks=decision_view(inp.tasks, stack), pinned=inp.pinned,
            tools=tool_round.results() if tool_round is not None else None,
            tool_cap=max(64, plan.budget.segments.get("evidence", 0) * 2 // 3),
            offered_tools=tool_round.offered if tool_round is not None else [],
            surface_conflicts=plan.surface_conflicts, required=plan.required, budget=budget, limit=limit,
            quotas=plan.budget.segments, ablate=frozenset(inp.ablate))


def closed(state: SessionState, inp: BuildInputs) -> BuildInputs:
    """The inputs with the ablated mechanisms of this stage closed (module doc): anchor routing —
    the latest turn's node is the anchor, so routing's shares are none —, and the environment
    channel — its notes kept out of recall, no recent event for the intent."""
    if Ablation.ROUTING in inp.ablate and inp.anchor_override is None:
        latest = next((state.turns[t].node_id for t in reversed(state.turn_order) if state.turns[t].node_id), None)
        inp = replace(inp, anchor_override=latest or NEW_ROOT)
    if Ablation.ENV in inp.ablate:
        env = tuple(n.note_id for n in state.notes.values() if n.kind == "env")
        inp = replace(inp, exclude_ids=(*inp.exclude_ids, *env), env_events=())
    return inp


def ungated(plan: ContextPlan) -> ContextPlan:
    """The plan with the relevance gate closed: threshold 0, so recall grades nothing and the
    history's summary lines pass as they are."""
    return plan.model_copy(update={"rerank": plan.rerank.model_copy(update={"relevance_threshold": 0.0})})


def running_tasks(tasks: TaskInputs) -> list[RunningTask]:
    """The tasks a live stream works on, or paused, as the intent's structure signal reads them."""
    return [RunningTask(task_id=t.task_id, name=t.name, status="paused" if t.paused else t.status.value)
            for t in tasks.running()]


def query_cosines(query: Sequence[float] | None, vectors: Mapping[str, Sequence[float] | np.ndarray]) -> dict[str, float]:
    """Cosine of the query and each stored vector (the recent turns'), for the relevance gate."""
    if query is None or not vectors:
        return {}
    ids = sorted(vectors)
    matrix = np.asarray([vectors[i] for i in ids], dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    sims = np.divide(matrix @ q, norms, out=np.zeros(len(ids)), where=norms > 0)
    return {i: round(float(x), 6) for i, x in zip(ids, sims)}
