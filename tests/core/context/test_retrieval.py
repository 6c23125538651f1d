"""Recall's structured channel and fusion over an in-memory session (no index)."""

from __future__ import annotations

import asyncio

import pytest

from app.core.context.retrieval import RecallRequest, recall
from app.core.session.state import NoteView, SessionState
from app.core.types import Author, AuthorKind, Message, Role


def _state() -> SessionState:
    state = SessionState("s")
    rows = [("Ana", "2024-01-01T10:00:00", "old plan"), ("Ben", "2024-01-05T09:00:00", "ben note"),
            ("Ana", "2024-01-05T10:00:00", "new plan")]
    for i, (who, at, text) in enumerate(rows):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text, at=at,
                                  author=Author(kind=AuthorKind.USER, id=who), turn_id=f"t{i}"))
    state.add_note(NoteView("f1", "env", "report.md changed", "2024-01-05T08:00:00"))
    return state


def _run(req: RecallRequest) -> list[str]:
    async def no_index(*_a, **_k):  # pragma: no cover - no index channels requested
        return []

    result, _ = asyncio.run(recall(_state(), req, query_vector=None, search=None, run_blocking=no_index))
    run = next(r for r in result.channels if r.channel == "structured")
    return [i for i, _ in run.hits]


def test_structured_filters_by_speaker_kind_and_date_range() -> None:
    base = dict(query="q", channel_sizes={"structured": 10}, now="2024-01-05T12:00:00")
    day = dict(since="2024-01-04T12:00:00", until="2024-01-05T12:00:01", date_mode="filter")
    assert _run(RecallRequest(**base, speakers=["ana"])) == ["m2", "m0"]
    assert _run(RecallRequest(**base, speakers=["Ana"], **day)) == ["m2"]
    assert _run(RecallRequest(**base, kinds=["file"])) == ["f1"]
    assert _run(RecallRequest(**base, speakers=["Ben"], kinds=["file"], **day)) == ["m1", "f1"]
    # "prefer" mode excludes nothing
    assert _run(RecallRequest(**base, speakers=["Ana"], **{**day, "date_mode": "prefer"})) == ["m2", "m0"]
    assert _run(RecallRequest(**{**base, "channel_sizes": {"structured": 1}}, speakers=["Ana"])) == ["m2"]



def test_the_topic_channel_keeps_to_the_date_range_like_the_others() -> None:
    def topics(query: str, k: int, session: str | None) -> list[tuple[str, float]]:
        return [("m0", 2.0), ("m2", 1.5), ("other-session", 1.0)][:k]  # m0 is of 1 January

    async def no_index(*_a, **_k):  # pragma: no cover - no index channels requested
        return []

    def hits(**day: str) -> list[str]:
        req = RecallRequest(query="plan", channel_sizes={"topic": 3}, now="2024-01-05T12:00:00", **day)
        result, _ = asyncio.run(recall(_state(), req, query_vector=None, search=None, run_blocking=no_index,
                                    topics=topics))
        return [i for i, _ in next(r for r in result.channels if r.channel == "topic").hits]

    assert hits() == ["m0", "m2", "other-session"]
    day = dict(since="2024-01-04T12:00:00", until="2024-01-05T12:00:01")
    assert hits(**day, date_mode="filter") == ["m2", "other-session"]  # (another session's is not dated here)
    assert hits(**day, date_mode="prefer") == ["m0", "m2", "other-session"]

def test_the_topic_channel_keeps_to_the_anchors_tree_among_several_conversations() -> None:
    from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind

    state = _state()
    nodes = []
    for i in range(3):
        node = GraphNode(kind=NodeKind.TURN, label=f"t{i}", ref_id=f"t{i}")
        state.add_node(node)
        state.turns[f"t{i}"].node_id = node.node_id
        nodes.append(node.node_id)
    state.add_edge(GraphEdge(src=nodes[2], dst=nodes[0], kind=EdgeKind.CONTINUES))  # t1: another conversation

    def topics(query: str, k: int, session: str | None) -> list[tuple[str, float]]:
        return [("m1", 2.0), ("m0", 1.5), ("other-session", 1.0)][:k]

    async def no_index(*_a, **_k):  # pragma: no cover - no index channels requested
        return []

    def hits(anchor: str | None) -> list[str]:
        req = RecallRequest(query="plan", channel_sizes={"topic": 3}, anchor_node=anchor)
        result, _ = asyncio.run(recall(state, req, query_vector=None, search=None, run_blocking=no_index,
                                    topics=topics))
        return [i for i, _ in next(r for r in result.channels if r.channel == "topic").hits]

    assert hits(nodes[2]) == ["m0", "other-session"]  # Ben's conversation (m1) is left to the other channels
    assert hits(None) == ["m1", "m0", "other-session"]  # a new conversation: the whole session


def test_workspace_recall_returns_other_sessions_notes_and_writes_nothing_to_the_state() -> None:
    """Another session's hit is read as a note the fusion ranks, and returned to the caller (the
    engine adds it after the build): the state recall was given is unchanged."""
    from app.core.context.retrieval import ChannelRun

    state = _state()
    before = dict(state.notes)
    asked: list[list[str]] = []

    async def outside(ids: list[str]) -> list[NoteView]:
        asked.append(ids)
        return [NoteView(i, "outside", "Dee: the plan is old", "2024-01-02T10:00:00", origin="Elsewhere")
                for i in ids]

    async def no_index(*_a, **_k):  # pragma: no cover - the vector channel is recorded
        return []

    def run(scope: str) -> tuple[list[str], list[NoteView]]:
        req = RecallRequest(query="plan", channel_sizes={"vector": 3}, scope=scope, top_k=5)
        vector = ChannelRun(channel="vector", size=3, hits=[("x9", 0.9), ("m2", 0.8)])
        result, notes = asyncio.run(recall(state, req, query_vector=[0.1], search=None, run_blocking=no_index,
                                           recorded={"vector": vector}, outside=outside))
        return [c.id for c in result.candidates if c.kept], notes

    kept, notes = run("workspace")
    assert asked == [["x9"]] and [n.note_id for n in notes] == ["x9"]
    assert kept[0] == "x9"  # fused and kept as a note of the state it was read for
    assert state.notes == before and "x9" not in state.notes  # ... which recall left as it was
    kept, notes = run("session")  # the session's own scope asks nothing of other sessions
    assert notes == [] and "x9" not in kept and len(asked) == 1


def _fused(req: RecallRequest, runs: list, state: SessionState | None = None):
    from app.core.context.retrieval import PCM_FUSION, fuse

    return fuse(state or _state(), req, PCM_FUSION, runs)


def test_plan_bounds_act_on_fusion() -> None:
    from app.core.context.retrieval import ChannelRun

    runs = [ChannelRun(channel="vector", size=3, hits=[("m0", 0.9), ("m1", 0.8), ("m2", 0.7)]),
            ChannelRun(channel="fulltext", size=1, hits=[("m2", 3.0)])]
    base = dict(query="plan", channel_sizes={}, top_k=5)
    full = _fused(RecallRequest(**base), runs)
    assert set(full.kept_ids()) == {"m0", "m1", "m2"} and full.pool_left_out == 0
    # candidate_pool: rank 1 of every channel first, then rank 2: m0, m2, then m1 is left out
    pooled = _fused(RecallRequest(**base, candidate_pool=2), runs)
    assert set(pooled.kept_ids()) == {"m0", "m2"} and pooled.pool_left_out == 1
    # per_channel_cap: only one item found by the vector channel alone may stay
    capped = _fused(RecallRequest(**base, per_channel_cap=1), runs)
    assert set(capped.kept_ids()) == {"m0", "m2"}
    m1 = next(c for c in capped.candidates if c.id == "m1")
    assert m1.reason.startswith("over the per-channel cap of 1 (found only by vector)")
    # a channel past its time limit is recorded as skipped and contributes nothing
    skipped = ChannelRun(channel="vector", size=3, hits=[("m0", 0.9)], skipped=True, error="skipped: past its time limit")
    assert _fused(RecallRequest(**base), [skipped, runs[1]]).kept_ids() == ["m2"]


def test_the_gate_drops_weak_candidates_and_says_why() -> None:
    from app.core.context.gate import BELOW
    from app.core.context.retrieval import ChannelRun

    runs = [ChannelRun(channel="vector", size=3, hits=[("m2", 0.62), ("m0", 0.55), ("m1", 0.04)])]
    result = _fused(RecallRequest(query="the new plan", channel_sizes={}, top_k=5, relevance_threshold=0.3), runs)
    assert result.kept_ids() == ["m2", "m0"]
    m1 = next(c for c in result.candidates if c.id == "m1")
    # its score is the lowest of the list: no support could lift it, so none is measured
    assert not m1.kept and m1.reason.startswith(BELOW) and "whatever its support" in m1.reason
    assert m1.grade is None and m1.relation == "other"
    assert result.gate is not None and result.gate.passed == 2 and not result.gate.insufficient
    nothing = _fused(RecallRequest(query="zebras", channel_sizes={}, top_k=5, relevance_threshold=0.3),
                     [ChannelRun(channel="vector", size=1, hits=[("m1", 0.02)])])
    assert nothing.kept_ids() == [] and nothing.gate is not None and nothing.gate.insufficient


def test_the_recent_window_is_the_anchors_branch() -> None:
    from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind

    state = _state()
    nodes = {}
    for i in range(3):
        node = GraphNode(kind=NodeKind.TURN, label=f"t{i}", ref_id=f"t{i}")
        state.add_node(node)
        nodes[i] = node.node_id
        state.turns[f"t{i}"].node_id = node.node_id
    state.add_edge(GraphEdge(src=nodes[2], dst=nodes[0], kind=EdgeKind.CONTINUES))  # t1 is another root

    async def no_index(*_a, **_k):  # pragma: no cover
        return []

    def recent(anchor: str | None) -> list[str]:
        req = RecallRequest(query="q", channel_sizes={"recent": 5}, anchor_node=anchor)
        result, _ = asyncio.run(recall(state, req, query_vector=None, search=None, run_blocking=no_index))
        return [i for i, _ in next(r for r in result.channels if r.channel == "recent").hits]

    assert recent(nodes[2]) == ["m2", "m0"]  # newest first, only the branch tree of the anchor
    assert recent(None) == ["m2", "m1", "m0"]  # no anchor: the whole session


def test_other_branches_need_meaning_and_words_once_the_session_has_several() -> None:
    from app.core.context.retrieval import ChannelRun
    from app.core.types import GraphNode, NodeKind

    state = _state()
    runs = [ChannelRun(channel="vector", size=3, hits=[("m2", 0.7), ("m0", 0.65), ("m1", 0.1)])]
    req = RecallRequest(query="zebra crossing", channel_sizes={}, top_k=5, relevance_threshold=0.3)
    assert _fused(req, runs, state).kept_ids() == ["m2", "m0"]  # one conversation: similarity suffices
    for i in range(2):  # two separate roots: each turn its own conversation
        node = GraphNode(kind=NodeKind.TURN, label=f"t{i}", ref_id=f"t{i}")
        state.add_node(node)
        state.turns[f"t{i}"].node_id = node.node_id
    result = _fused(req, runs, state)
    assert result.kept_ids() == [] and result.gate is not None and result.gate.insufficient


def test_a_fact_of_another_conversation_is_judged_as_that_conversation() -> None:
    """A remembered fact whose subject the input names passes as linked, unless every message it
    restates lies on another branch tree than the anchor's: then it must pass as another branch."""
    from app.core.context.retrieval import ChannelRun
    from app.core.types import GraphNode, NodeKind

    state = _state()
    nodes = []
    for i in range(3):  # three roots: each turn its own conversation
        node = GraphNode(kind=NodeKind.TURN, label=f"t{i}", ref_id=f"t{i}")
        state.add_node(node)
        state.turns[f"t{i}"].node_id = node.node_id
        nodes.append(node.node_id)
    state.add_note(NoteView("fact", "memory", "Fact: file is corrupt", "2024-01-05T09:00:00",
                            source_ids=("m1",), key="file", memory_type="fact"))
    runs = [ChannelRun(channel="memory", size=1, hits=[("fact", 0.2)])]

    def relation(anchor: str) -> str | None:
        req = RecallRequest(query="which file do I edit?", channel_sizes={}, top_k=5, anchor_node=anchor,
                            relevance_threshold=0.3)
        return next(c.relation for c in _fused(req, runs, state).candidates if c.id == "fact")

    assert relation(nodes[1]) == "linked"  # its message is on the anchor's tree
    assert relation(nodes[2]) == "other"  # Ben's conversation, not this one


def test_an_index_channel_past_the_plans_time_limit_is_skipped_and_recorded() -> None:
    import time

    class SlowIndex:
        def search_vector(self, query, k=10, **_kw):  # type: ignore[no-untyped-def]
            time.sleep(0.5)
            return [("m0", 0.9)]

        def search_text(self, query, k=10, **_kw):  # type: ignore[no-untyped-def]
            return [("m2", 2.0)]

    async def run_blocking(fn, *args, **kw):  # type: ignore[no-untyped-def]
        return await asyncio.to_thread(fn, *args, **kw)

    req = RecallRequest(query="new plan", channel_sizes={"vector": 3, "fulltext": 3}, top_k=5, timeout_ms=50)
    result, _ = asyncio.run(recall(_state(), req, query_vector=[0.1, 0.2], search=SlowIndex(), run_blocking=run_blocking))
    runs = {r.channel: r for r in result.channels}
    assert runs["vector"].skipped and "time limit of 50 ms" in runs["vector"].error and not runs["vector"].hits
    assert not runs["fulltext"].skipped and result.kept_ids() == ["m2"]


def test_another_conversation_enters_only_for_what_this_one_does_not_say() -> None:
    """Continuing a conversation about a gftp upload, a turn of another conversation that says
    "gftp" and "upload" again adds nothing and is dropped; one that holds "ssl", which the
    conversation does not, passes the gate."""
    from app.core.context.retrieval import ChannelRun
    from app.core.types import GraphNode, NodeKind

    state = SessionState("s")
    texts = ["the gftp upload failed", "gftp upload works for me", "gftp has ssl support"]
    for i, text in enumerate(texts):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text, at=f"2024-01-0{i + 1}T10:00:00",
                                  author=Author(kind=AuthorKind.USER, id="ana"), turn_id=f"t{i}"))
        node = GraphNode(kind=NodeKind.TURN, label=f"t{i}", ref_id=f"t{i}")  # each its own conversation
        state.add_node(node)
        state.turns[f"t{i}"].node_id = node.node_id
    runs = [ChannelRun(channel="recent", size=1, hits=[("m0", 1.0)]),
            ChannelRun(channel="vector", size=2, hits=[("m1", 0.8), ("m2", 0.8)])]
    req = RecallRequest(query="gftp upload over ssl", channel_sizes={}, top_k=5, relevance_threshold=0.3,
                        anchor_node=state.turns["t0"].node_id)
    result = _fused(req, runs, state)
    assert sorted(result.kept_ids()) == ["m0", "m2"]
    dropped = next(c for c in result.candidates if c.id == "m1")
    assert dropped.relation == "other" and "already in this one" in dropped.reason


def test_older_turns_of_the_tree_are_held_to_the_other_conversations_bar_when_there_are_several() -> None:
    """m0 opened a conversation about a gftp upload and m2 continues it (the recent window); an
    older turn of that tree repeating "gftp upload" passes on its own merit while the session holds
    one conversation, and is dropped once a second conversation (m3) has started: then the tree
    was grown by routing and its older turns must add a word of the input, as "ssl" does."""
    from app.core.context.retrieval import ChannelRun
    from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind

    def session(conversations: int) -> SessionState:
        state = SessionState("s")
        texts = ["gftp upload works for me", "gftp has ssl support", "the gftp upload failed", "anyone seen my keys"]
        nodes = []
        for i, text in enumerate(texts[:3 + (conversations > 1)]):
            state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text,
                                      at=f"2024-01-0{i + 1}T10:00:00", author=Author(kind=AuthorKind.USER, id="ana"),
                                      turn_id=f"t{i}"))
            node = GraphNode(kind=NodeKind.TURN, label=f"t{i}", ref_id=f"t{i}")
            state.add_node(node)
            state.turns[f"t{i}"].node_id = node.node_id
            nodes.append(node.node_id)
        for i in (1, 2):  # one tree: m0 ← m1 ← m2
            state.add_edge(GraphEdge(src=nodes[i], dst=nodes[i - 1], kind=EdgeKind.CONTINUES))
        return state

    runs = [ChannelRun(channel="recent", size=1, hits=[("m2", 1.0)]),
            ChannelRun(channel="vector", size=2, hits=[("m0", 0.8), ("m1", 0.8)])]
    for conversations, kept in ((1, ["m0", "m1", "m2"]), (2, ["m1", "m2"])):
        state = session(conversations)
        req = RecallRequest(query="gftp upload over ssl", channel_sizes={}, top_k=5, relevance_threshold=0.3,
                            anchor_node=state.turns["t2"].node_id)
        result = _fused(req, runs, state)
        assert sorted(result.kept_ids()) == kept, conversations
    dropped = next(c for c in result.candidates if c.id == "m0")
    assert dropped.relation == "tree" and "an older turn of this tree" in dropped.reason


def _turns(texts: list[str], parents: dict[int, tuple[int, dict]]) -> tuple[SessionState, list[str]]:
    """A session of one turn per text (ids m<i>, t<i>), each its own root unless ``parents``
    (child → (parent, edge attrs)) continues it."""
    from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind

    state, nodes = SessionState("s"), []
    for i, text in enumerate(texts):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text, at=f"2024-01-0{i + 1}T10:00:00",
                                  author=Author(kind=AuthorKind.USER, id="ana"), turn_id=f"t{i}"))
        node = GraphNode(kind=NodeKind.TURN, label=f"t{i}", ref_id=f"t{i}")
        state.add_node(node)
        state.turns[f"t{i}"].node_id = node.node_id
        nodes.append(node.node_id)
    for child, (parent, attrs) in parents.items():
        state.add_edge(GraphEdge(src=nodes[child], dst=nodes[parent], kind=EdgeKind.CONTINUES, attrs=attrs))
    return state, nodes


def test_the_graph_channel_carries_the_soft_members_of_the_trees_routing_hesitated_over() -> None:
    """Two conversations: m0 ← m1 and m2 ← m3, m3 routed onto m2 unsure. An input continuing m1
    that routing nearly put on m3 (share .4) gets m3 and m2 through the graph channel, as linked
    turns the strict gate lets through; without that share, m2 and m3 stay out."""
    from app.core.session.membership import ROUTED

    state, nodes = _turns(["is the mirror down", "yes since noon", "my wifi drops", "which driver do you use"],
                          {1: (0, {}), 3: (2, {ROUTED: 0.7})})

    async def no_index(*_a, **_k):  # pragma: no cover
        return []

    def kept(alternatives: list[tuple[str, float]]) -> tuple[list[str], list[str]]:
        req = RecallRequest(query="the iwlwifi one", channel_sizes={"graph": 10, "recent": 5}, top_k=5,
                            relevance_threshold=0.3, anchor_node=nodes[1], alternatives=alternatives)
        result, _ = asyncio.run(recall(state, req, query_vector=None, search=None, run_blocking=no_index))
        graph = next(r for r in result.channels if r.channel == "graph")
        return [i for i, _ in graph.hits], sorted(result.kept_ids())

    hits, chosen = kept([(nodes[3], 0.4)])
    assert hits[:2] == ["m1", "m0"] and set(hits[2:]) == {"m2", "m3"}  # the chain first, then soft members
    assert chosen == ["m0", "m1", "m2", "m3"]
    assert kept([]) == (["m1", "m0"], ["m0", "m1"])
    assert kept([(nodes[3], 0.05)])[1] == ["m0", "m1"]  # a share below the threshold widens nothing


def test_a_conversation_routing_ruled_out_for_the_input_gives_it_no_turn() -> None:
    """m1 continues m0; m2 is another conversation, about the input by meaning and words. On its
    merit it passes; once routing's own split is known (``routed``) and leaves m2's tree out, it
    fails and says why. A tree routing kept as an alternative still enters on its merit."""
    from app.core.context.retrieval import ChannelRun

    state, nodes = _turns(["the build fails on arm", "which compiler", "gcc 12 fails on arm with neon flags"],
                          {1: (0, {})})
    runs = [ChannelRun(channel="recent", size=2, hits=[("m1", 1.0), ("m0", 0.5)]),
            ChannelRun(channel="vector", size=1, hits=[("m2", 0.9)])]

    def judged(**routing) -> object:
        req = RecallRequest(query="gcc neon flags on arm", channel_sizes={}, top_k=5, relevance_threshold=0.3,
                            anchor_node=nodes[1], **routing)
        return _fused(req, runs, state)

    assert "m2" in judged().kept_ids()  # on its own merit
    result = judged(routed=True)
    other = next(c for c in result.candidates if c.id == "m2")
    assert not other.kept and "another conversation, one routing ruled out for this input" in other.reason
    assert "m2" in judged(routed=True, alternatives=[(nodes[2], 0.01)]).kept_ids()


def test_neighbours_too_far_below_the_best_are_counted_not_listed() -> None:
    from app.core.context.retrieval import ChannelRun

    state = SessionState("s")
    rows = [("t0", Role.USER, "m0", "the march budget plan"), ("t0", Role.ASSISTANT, "a0", "the budget plan is noted"),
            ("t1", Role.USER, "m1", "lunch at noon"), ("t1", Role.ASSISTANT, "a1", "pasta then"),
            ("t2", Role.USER, "m2", "the weather")]
    for n, (turn, role, mid, text) in enumerate(rows):
        state.add_message(Message(message_id=mid, role=role, content=text, at=f"2024-01-0{n + 1}T10:00:00",
                                  author=Author(kind=AuthorKind.USER, id="Ana"), turn_id=turn))
    runs = [ChannelRun(channel="vector", size=3, hits=[("m0", 0.9), ("m1", 0.2), ("m2", 0.1)])]
    result = _fused(RecallRequest(query="budget plan", channel_sizes={}, top_k=5, relevance_threshold=0.25), runs, state)
    listed = {c.id: c for c in result.candidates}
    assert result.gate is not None and result.gate.unlisted == 1 and "a1" not in listed  # next to a weak hit
    assert "a0" in listed and listed["a0"].grade is not None  # next to the best hit: graded on its support
    assert {"m1", "m2"} <= listed.keys()  # hits are listed whatever their grade
    assert result.gate.graded == len(listed)  # every listed candidate was graded, the unlisted one is not counted
    assert result.kept_ids()[0] == "m0"


def test_the_inputs_word_weights_count_the_listed_candidates_not_the_neighbours(monkeypatch) -> None:
    """The gate weighs the input's words by their rarity among the channels' hits only: the
    neighbours propagation reached from them (most of a real build's fused items) are not counted."""
    from app.core.context import gate
    from app.core.context.retrieval import ChannelRun

    state = SessionState("s")
    rows = [("t0", Role.USER, "m0", "the march budget plan"), ("t0", Role.ASSISTANT, "a0", "budget noted"),
            ("t1", Role.USER, "m1", "lunch at noon"), ("t1", Role.ASSISTANT, "a1", "budget pasta")]
    for n, (turn, role, mid, text) in enumerate(rows):
        state.add_message(Message(message_id=mid, role=role, content=text, at=f"2024-01-0{n + 1}T10:00:00",
                                  author=Author(kind=AuthorKind.USER, id="Ana"), turn_id=turn))
    counted: list[list[str]] = []
    real = gate.weights
    monkeypatch.setattr(gate, "weights", lambda query, texts: real(query, counted.append(list(texts)) or counted[-1]))
    runs = [ChannelRun(channel="vector", size=2, hits=[("m0", 0.9), ("m1", 0.8)])]
    result = _fused(RecallRequest(query="budget plan", channel_sizes={}, top_k=5, relevance_threshold=0.1), runs, state)
    assert result.gate is not None and {"a0", "a1"} & {c.id for c in result.candidates}  # neighbours were reached
    assert len(counted) == 1 and len(counted[0]) == 2  # the two hits' texts, not the neighbours'
    assert not any("noted" in t or "pasta" in t for t in counted[0])


def test_the_memory_channel_searches_only_when_a_memory_could_be_recalled() -> None:
    """A memory restating this session's own turn is never recalled (its turn is): with only such
    memories the channel does not search at all; a memory from another session is searched for."""
    asked: list[tuple] = []

    class Index:
        def search_vector(self, query, k=10, **kw):  # type: ignore[no-untyped-def]
            asked.append((k, kw.get("kinds")))
            return [("own", 0.9), ("theirs", 0.8)]

        def search_text(self, query, k=10, **_kw):  # type: ignore[no-untyped-def]
            return []

    async def run_blocking(fn, *args, **kw):  # type: ignore[no-untyped-def]
        return fn(*args, **kw)

    def memory_hits(state: SessionState) -> list[str]:
        req = RecallRequest(query="the plan", channel_sizes={"memory": 3}, top_k=5)
        result, _ = asyncio.run(recall(state, req, query_vector=[0.1, 0.2], search=Index(), run_blocking=run_blocking))
        return [i for i, _ in next(r for r in result.channels if r.channel == "memory").hits]

    state = _state()
    state.add_note(NoteView("own", "memory", "Ana has an old plan", "2024-01-01T10:00:00", source_ids=("m0",)))
    assert memory_hits(state) == [] and asked == []
    state.add_note(NoteView("theirs", "memory", "Ben's plan is new", "2024-01-02T10:00:00", origin="Other",
                            source_ids=("x9",)))
    assert memory_hits(state) == ["theirs"] and asked == [(6, ["memory"])]


def test_a_turn_that_only_asks_ranks_below_the_statement_that_answers_when_the_input_asks() -> None:
    """A question in the history resembles a question asked of it (by meaning and words) but
    states nothing: when the input asks, a turn that mostly asks loses part of its fused score,
    and the statement beside it, scored a little lower by the channels, is kept first. An input
    about what was asked, or one that asks nothing, keeps the channels' order."""
    from app.core.context.retrieval import PCM_FUSION, ChannelRun

    state = SessionState("s")
    rows = [("Ben", "What activities do you enjoy with your church friends?"),
            ("Ana", "Last weekend I went hiking with my church friends. It was great!"),
            ("Ben", "Lunch at noon.")]
    for n, (who, text) in enumerate(rows):
        state.add_message(Message(message_id=f"m{n}", role=Role.USER, content=text, at=f"2024-01-0{n + 1}T10:00:00",
                                  author=Author(kind=AuthorKind.USER, id=who), turn_id=f"t{n}"))
    runs = [ChannelRun(channel="vector", size=3, hits=[("m0", 0.8), ("m1", 0.7), ("m2", 0.1)])]

    def order(query: str) -> list[str]:
        return _fused(RecallRequest(query=query, channel_sizes={}, top_k=3), runs, state).kept_ids()

    assert PCM_FUSION.asking_discount > 0
    assert order("What activities has Ana done with her church friends?")[:2] == ["m1", "m0"]
    assert order("What did Ben ask about church friends?")[:2] == ["m0", "m1"]  # the asking is the evidence
    assert order("church friends activities")[:2] == ["m0", "m1"]  # nothing asked

    # A document's part that asks (an FAQ's question heading its answer) is no turn: never discounted.
    state.add_note(NoteView("faq", "env", "How do I join the church choir? Ask Ana.", "2024-01-04T10:00:00"))
    faq = [ChannelRun(channel="vector", size=2, hits=[("faq", 0.8), ("m1", 0.7), ("m2", 0.1)])]
    kept = _fused(RecallRequest(query="How do I join the church choir?", channel_sizes={}, top_k=3), faq, state)
    assert kept.kept_ids()[0] == "faq"


def test_the_asking_discount_leaves_the_answer_its_lift_from_the_question_next_to_it() -> None:
    """The discount comes after propagation: a strong question still lifts the turn after it."""
    from app.core.context.ranking import discounted, propagate

    scores = {"q": 1.0, "a": 0.0, "x": 0.2}
    lifted = propagate(scores, lambda i: {"q": ["a"], "a": ["q"]}.get(i, []), 0.3)
    after = discounted(lifted, lambda i: i == "q", 0.3)
    assert after["a"] == lifted["a"] == 0.3 and after["q"] == 0.7 * lifted["q"] and after["x"] == lifted["x"]


def test_when_the_input_asks_an_item_is_ranked_on_what_it_states() -> None:
    """Of turns the channels score alike, the one with a sentence about the question comes before
    one with the same words spread over unrelated sentences, and both before a short aside the
    channels scored higher. Without the two weights, or when the input asks nothing, the
    channels' order stands. A document's part gains by its best sentence too, but its length
    counts for nothing."""
    from app.core.context.gate import sentence_coverage, weights
    from app.core.context.retrieval import PCM_FUSION, ChannelRun, fuse

    state = SessionState("s")
    rows = [("Ben", "Cool! Sounds fun."),
            ("Ana", "Ana came by. The bands played loud. Berlin is far."),
            ("Ana", "We had lunch after. Two bands played for Ana in Berlin last spring!"),
            ("Ben", "Lunch at noon.")]
    for n, (who, text) in enumerate(rows):
        state.add_message(Message(message_id=f"m{n}", role=Role.USER, content=text, at=f"2024-01-0{n + 1}T10:00:00",
                                  author=Author(kind=AuthorKind.USER, id=who), turn_id=f"t{n}"))
    part = "The tour played Berlin. Bands for Ana."
    state.add_note(NoteView("doc", "env", part, "2024-01-05T10:00:00"))
    runs = [ChannelRun(channel="vector", size=5,
                       hits=[("m0", 0.9), ("doc", 0.85), ("m1", 0.8), ("m2", 0.8), ("m3", 0.1)])]
    plain = PCM_FUSION.model_copy(update={"sentence_match": 0.0, "length_prior": 0.0})

    def fused(query: str, strategy=PCM_FUSION) -> dict[str, float]:
        result = fuse(state, RecallRequest(query=query, channel_sizes={}, top_k=5), strategy, runs)
        return {c.id: c.fused for c in result.candidates}

    def turns(query: str, strategy=PCM_FUSION) -> list[str]:
        scores = fused(query, strategy)
        return [i for i in sorted(scores, key=lambda i: (-scores[i], i)) if i.startswith("m")]

    asked = "Which bands played for Ana in Berlin?"
    assert PCM_FUSION.sentence_match > 0 and PCM_FUSION.length_prior > 0
    assert turns(asked) == ["m2", "m1", "m0", "m3"]
    assert turns(asked, plain) == turns("bands Berlin Ana") == ["m0", "m1", "m2", "m3"]  # the channels' order
    texts = [r[1] for r in rows] + [part]
    gained = PCM_FUSION.sentence_match * sentence_coverage(weights(asked, texts), part)
    assert gained > 0 and abs(fused(asked)["doc"] - fused(asked, plain)["doc"] - gained) < 1e-9


def test_a_strategy_tuned_takes_a_channel_s_weight_or_a_field_by_its_name() -> None:
    from app.core.context.retrieval import PCM_FUSION

    tuned = PCM_FUSION.tuned({"time": 0.15, "length_prior": 0.05})
    assert tuned.weights == {**PCM_FUSION.weights, "time": 0.15} and tuned.length_prior == 0.05
    assert tuned.sentence_match == PCM_FUSION.sentence_match and PCM_FUSION.weights["time"] == 0.3
    assert PCM_FUSION.tuned({}) is PCM_FUSION
    with pytest.raises(ValueError, match="unknown recall weight rrf_k, speed"):
        PCM_FUSION.tuned({"speed": 1.0, "rrf_k": 10})


def test_when_one_sitting_clearly_holds_the_best_turn_its_other_turns_rise_with_it() -> None:
    """The lift is the best sitting's lead over the next: a turn from that sitting comes before a
    turn of equal score from another day, never before the sitting's best turn, which keeps its
    score (so nothing moves against a note ranked above it); with the lead gone (the best hits
    spread over sittings) or one sitting only, the channels' order stands."""
    from app.core.context.retrieval import PCM_FUSION, ChannelRun, fuse

    state = SessionState("s")
    days = ["2024-01-01T10:00:00", "2024-01-01T10:01:00", "2024-01-02T10:00:00", "2024-01-02T10:01:00"]
    for n, at in enumerate(days):
        state.add_message(Message(message_id=f"m{n}", role=Role.USER, content=f"said {n}", at=at,
                                  author=Author(kind=AuthorKind.USER, id="Ana"), turn_id=f"t{n}"))
    state.add_note(NoteView("doc", "env", "a note", "2024-01-02T10:00:00"))
    strategy = PCM_FUSION.model_copy(update={"neighbour_alpha": 0.0, "asking_discount": 0.0, "sentence_match": 0.0,
                                             "length_prior": 0.0, "sitting_lift": 0.5})

    def fused(hits: list[tuple[str, float]], query: str = "What did Ana say?", lift: float = 0.5) -> dict[str, float]:
        runs = [ChannelRun(channel="vector", size=5, hits=hits)]
        plan = strategy.model_copy(update={"sitting_lift": lift})
        result = fuse(state, RecallRequest(query=query, channel_sizes={}, top_k=5), plan, runs)
        return {c.id: c.fused for c in result.candidates}

    w = PCM_FUSION.weights["vector"]
    hits = [("m0", 1.0), ("m2", 0.8), ("m1", 0.5), ("m3", 0.5), ("doc", 0.5)]
    plain = fused(hits, lift=0.0)
    lead = plain["m0"] - plain["m2"]  # sitting 0's best over sitting 1's
    assert lead > 0 and plain["m1"] == plain["m3"] == plain["doc"]
    lifted = fused(hits)
    assert lifted["m1"] == pytest.approx(plain["m1"] + 0.5 * lead) and lifted["m1"] > lifted["m3"] == plain["m3"]
    assert lifted["m0"] == plain["m0"] and lifted["doc"] == plain["doc"]  # the best turn itself stays
    swapped = [("m1", 1.0), ("m2", 0.8), ("m0", 0.5), ("m3", 0.5)]  # the best turn is m1 now
    high = fuse(state, RecallRequest(query="What did Ana say?", channel_sizes={}, top_k=5),
                strategy.model_copy(update={"sitting_lift": 100.0}), [ChannelRun(channel="vector", size=5, hits=swapped)])
    assert high.kept_ids()[:2] == ["m1", "m0"]  # m0 lifted all the way, still after the sitting's best
    assert {c.id: c.fused for c in high.candidates}["m0"] == pytest.approx(plain["m0"])
    assert fused(hits, query="Ana said things") == plain  # the input asks nothing
    tied = [("m0", 1.0), ("m2", 1.0), ("m1", 0.5), ("m3", 0.5)]
    assert fused(tied) == fused(tied, lift=0.0)  # no sitting leads
    alone = SessionState("s")
    for n in range(2):
        alone.add_message(Message(message_id=f"m{n}", role=Role.USER, content="x", at=days[n], turn_id=f"t{n}"))
    one = fuse(alone, RecallRequest(query="What?", channel_sizes={}, top_k=5), strategy,
               [ChannelRun(channel="vector", size=5, hits=[("m0", 1.0), ("m1", 0.5)])])
    assert [c.fused for c in one.candidates] == pytest.approx([w, 0.0])  # one sitting: nothing lifted
