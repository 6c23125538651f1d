"""Follow-ups in anchor routing: the ``follow`` and ``shift`` features over a session of three
interleaved conversations (``routing.reference`` finds what a follow-up refers to)."""

from __future__ import annotations

from app.core.routing.anchor import SESSION_DEFAULT, AnchorRouter, Feature
from app.core.routing.candidates import Place, anchor_candidates
from app.core.routing.reference import answered, pointed, refer
from app.core.session.state import SessionState
from app.core.types import Author, AuthorKind, EdgeKind, GraphEdge, GraphNode, Message, NodeKind, Role

#: (conversation, user text, answer) in the order they were said.
TURNS = [
    ("kyoto", "How far is it from Tokyo to Kyoto, and is the shinkansen worth it?",
     "About 450 km; the shinkansen takes two hours and a rail pass can pay off."),
    ("python", "My Python script raises KeyError: 'port' when it reads config.yaml.",
     "The loaded dictionary has no 'port' key; use config.get('port', 8080)."),
    ("email", "Draft an email to my landlord about the broken heating.",
     "Dear landlord, the heating in the flat has been broken since Monday..."),
]


def _session(last_answer: str | None = None, answers: dict[str, str] | None = None) -> tuple[SessionState, dict[str, str]]:
    """A session of the three conversations, each a root (``last_answer``: the latest one's answer
    instead of its own; ``answers``: conversation → its answer instead of its own); conversation →
    its turn's node."""
    state = SessionState("s")
    nodes: dict[str, str] = {}
    turns = TURNS if last_answer is None else [*TURNS[:-1], (*TURNS[-1][:2], last_answer)]
    turns = [(name, said, (answers or {}).get(name, answer)) for name, said, answer in turns]
    for i, (name, said, answer) in enumerate(turns):
        at = f"2024-01-01T10:0{i}:00"
        state.add_message(Message(message_id=f"u{i}", turn_id=f"t{i}", role=Role.USER, content=said, at=at,
                                  author=Author(kind=AuthorKind.USER)))
        state.add_message(Message(message_id=f"a{i}", turn_id=f"t{i}", role=Role.ASSISTANT, content=answer,
                                  at=at, author=Author(kind=AuthorKind.AGENT, id="assistant")))
        node = GraphNode(kind=NodeKind.TURN, ref_id=f"t{i}", created_at=at)
        state.add_node(node)
        nodes[name] = node.node_id
    return state, nodes


def _route(state: SessionState, text: str, place: Place | None,
           entities: tuple[str, ...] = ()) -> tuple[str | None, dict[str, dict[str, float]]]:
    cands = anchor_candidates(state, {}, text=text, at="2024-01-01T10:05:00", query_vector=None, place=place,
                              intent_entities=entities)
    decision = AnchorRouter(SESSION_DEFAULT).route(cands)
    return (None if decision.new_root else decision.anchor_id), {c.node_id: dict(c.features) for c in cands}


def test_a_follow_up_continues_the_latest_conversation_when_nothing_else_fits() -> None:
    state, nodes = _session()
    text = "And roughly how much would that cost?"
    assert refer(state, list(nodes.values()), text, {}).node == nodes["email"]
    anchor, features = _route(state, text, Place(follow_up=0.8))
    assert anchor == nodes["email"]
    assert features[nodes["email"]][Feature.FOLLOW] == 0.8
    assert Feature.FOLLOW not in features[nodes["kyoto"]]


def test_a_follow_up_continues_the_conversation_its_words_point_to() -> None:
    state, nodes = _session()
    for text, gold in [("And what about the rail pass?", "kyoto"), ("What if the port key is missing?", "python"),
                       ("Make the heating part shorter", "email")]:
        referent = refer(state, list(nodes.values()), text, {})
        assert referent.node == nodes[gold], text
        anchor, _ = _route(state, text, Place(follow_up=0.8))
        assert anchor == nodes[gold], text


def test_without_the_intent_reading_there_is_no_follow_feature() -> None:
    state, nodes = _session()
    anchor, features = _route(state, "And roughly how much would that cost?", None)
    assert all(Feature.FOLLOW not in f and Feature.SHIFT not in f for f in features.values())
    assert anchor is None  # focus and recency alone stay below tau_new


def test_an_opening_leaves_the_conversations_it_does_not_name() -> None:
    state, nodes = _session()
    anchor, features = _route(state, "By the way, what is the capital of Peru?", Place(follow_up=0.3, topic_shift=0.8))
    assert anchor is None
    assert all(f[Feature.SHIFT] == 0.8 for f in features.values())
    # An opening that names a conversation is not pushed away from it.
    _, features = _route(state, "By the way, the shinkansen rail pass: is it worth it?", Place(topic_shift=0.8))
    assert Feature.SHIFT not in features[nodes["kyoto"]]
    assert features[nodes["python"]][Feature.SHIFT] == 0.8


def test_a_follow_up_continues_the_tip_of_its_conversation() -> None:
    state, nodes = _session()
    at = "2024-01-01T10:04:00"
    state.add_message(Message(message_id="u3", turn_id="t3", role=Role.USER, content="Is the rail pass refundable?",
                              at=at, author=Author(kind=AuthorKind.USER)))
    tip = GraphNode(kind=NodeKind.TURN, ref_id="t3", created_at=at)
    state.add_node(tip)
    state.add_edge(GraphEdge(src=tip.node_id, dst=nodes["kyoto"], kind=EdgeKind.CONTINUES))
    referent = refer(state, [*nodes.values(), tip.node_id], "And the shinkansen?", {})
    assert referent.node == tip.node_id  # the latest turn, and of the conversation it names


def test_pointing_needs_a_fair_share_of_the_inputs_words_and_beats_the_latest_only_when_closer() -> None:
    # 1 shared word of 8 own ones is chance; 2 of 4 points.
    assert pointed({"a": 1, "b": 0}, 8, "b", {}) == {}
    assert pointed({"a": 2, "b": 0}, 4, "b", {"a": 0.5, "b": 0.2}) == {"a": 2}
    # another tree must share more words than the latest one and be as close in meaning
    assert pointed({"a": 2, "b": 2}, 4, "b", {"a": 0.9, "b": 0.1}) == {"b": 2}
    assert pointed({"a": 3, "b": 1}, 4, "b", {"a": 0.1, "b": 0.5}) == {"b": 1}


def test_a_short_question_about_a_name_no_conversation_said_leaves_them_all() -> None:
    state, nodes = _session()
    anchor, features = _route(state, "What is the capital of Peru?", Place(), ("Peru",))
    assert anchor is None
    # "Peru" is one of its two own words ("capital", "peru"), said on no conversation
    assert all(f[Feature.SHIFT] == 0.5 for f in features.values())
    # a name a conversation said is no shift from it; a leaning input shifts by what it does not lean on
    _, features = _route(state, "What about the shinkansen from Kyoto to Osaka?", Place(follow_up=0.8),
                         ("Kyoto", "Osaka"))
    assert features[nodes["kyoto"]][Feature.SHIFT] == round(1 / 3 * 0.2, 6)  # "Osaka" is new to it
    assert features[nodes["python"]][Feature.SHIFT] == round(2 / 3 * 0.2, 6)
    # a long input speaks for itself by its meaning
    long = ("What is the capital of Peru and which of its museums, markets, parks and old churches would suit "
            "a family with two small children?")
    _, features = _route(state, long, Place(), ("Peru",))
    assert all(Feature.SHIFT not in f for f in features.values())


def test_a_label_names_its_subject_but_a_sentence_capital_does_not() -> None:
    from app.core.routing.candidates import named_entities

    assert named_entities("Small talk: the lamp in room 3 is blue.", ["Small", "3"], set()) == ["Small", "3"]
    assert named_entities("Wow! Last week was great.", ["Wow", "Last"], set()) == []
    assert named_entities("We met Ana in Lisbon.", ["Ana", "Lisbon"], {"ana"}) == ["Lisbon"]


def test_a_statement_after_an_answer_that_asked_replies_to_it_and_thanks_react_to_the_latest() -> None:
    state, nodes = _session("Here is the draft. Should I mention the deposit too?")
    _, features = _route(state, "I think the deposit can wait.", Place(statement=True))
    assert features[nodes["email"]][Feature.REPLY] == 1.0
    assert all(Feature.REPLY not in features[nodes[n]] for n in ("kyoto", "python"))
    # a question is no reply; an answer that asks nothing waits for none
    _, features = _route(state, "Is the deposit refundable?", Place(statement=False))
    assert all(Feature.REPLY not in f for f in features.values())
    plain, _ = _session("Here is the draft.")
    _, features = _route(plain, "I think the deposit can wait.", Place(statement=True))
    assert all(Feature.REPLY not in f for f in features.values())
    # "Thanks! …" reacts to what was just said when its words speak of it too, even when more of them
    # name another conversation; when they speak only of another one, it reacts to that one
    thanks = "Thanks! The deposit can wait; the rail pass and the shinkansen sound good"
    assert refer(state, list(nodes.values()), thanks, {}).node == nodes["email"]
    for text in ("Thanks! The rail pass and the shinkansen sound good", "The rail pass and the shinkansen sound good"):
        assert refer(state, list(nodes.values()), text, {}).node == nodes["kyoto"], text


#: Both the Kyoto trip's answer and the email's (the latest) end with a question to the user.
WAITING = {"kyoto": "About 450 km; two hours by shinkansen. Do you want the rail pass?",
           "email": "Here is the draft. Should I mention the deposit too?"}


def test_a_return_that_names_its_conversation_replies_to_its_question_not_the_latest() -> None:
    state, nodes = _session(answers=WAITING)
    text = "The rail pass, yes: the shinkansen both ways."
    referent = refer(state, list(nodes.values()), text, {})
    assert referent.node == referent.asked == nodes["kyoto"]
    anchor, features = _route(state, text, Place(follow_up=0.3, statement=True))
    assert features[nodes["kyoto"]][Feature.REPLY] == 1.0
    assert Feature.REPLY not in features[nodes["email"]]
    assert anchor == nodes["kyoto"]
    # words that point to the latest conversation keep the reply there
    assert refer(state, list(nodes.values()), "The deposit, yes: mention it.", {}).asked == nodes["email"]


def test_a_reply_naming_nothing_answers_the_waiting_question_closest_in_meaning() -> None:
    state, nodes = _session(answers=WAITING)
    every = list(nodes.values())
    text = "Yes, I think so, both ways would be best."  # its words name neither conversation
    assert refer(state, every, text, {}).asked == nodes["email"]  # a tie: the question just asked
    assert refer(state, every, text, {nodes["kyoto"]: 0.33, nodes["email"]: 0.3}).asked == nodes["email"]
    closer = {nodes["kyoto"]: 0.6, nodes["email"]: 0.3, nodes["python"]: 0.9}
    assert refer(state, every, text, closer).asked == nodes["kyoto"]  # python asked nothing
    # an answer that asked nothing waits for no reply: an older question is replied to only by name
    older, nodes = _session(answers={"kyoto": WAITING["kyoto"]})
    every = list(nodes.values())
    assert refer(older, every, text, closer).asked is None
    assert refer(older, every, "The rail pass, yes: the shinkansen both ways.", {}).asked == nodes["kyoto"]


def test_an_opening_replies_to_no_question() -> None:
    state, nodes = _session("Here is the draft. Should I mention the deposit too?")
    _, features = _route(state, "Hey! Long time no see, lots has happened.", Place(statement=True, topic_shift=0.6))
    assert all(Feature.REPLY not in f for f in features.values())
    assert all(f[Feature.SHIFT] == 0.6 for f in features.values())


def test_answered_prefers_the_named_conversation_then_clearly_closer_meaning_then_the_latest() -> None:
    waiting = {"k": "k1", "e": "e1"}
    assert answered(waiting, "k", frozenset({"k"}), "e1", {"e1": 0.9}) == "k1"
    assert answered(waiting, "e", frozenset(), "e1", {"k1": 0.5, "e1": 0.4}) == "k1"
    assert answered(waiting, "e", frozenset(), "e1", {"k1": 0.4, "e1": 0.4}) == "e1"
    assert answered(waiting, "e", frozenset(), "e1", {"k1": 0.44, "e1": 0.4}) == "e1"  # within SAME_MEANING
    assert answered({"k": "k1"}, "e", frozenset(), "e1", {"k1": 0.9}) is None
    assert answered({}, "e", frozenset(), "e1", {}) is None


def test_a_conversation_holding_a_document_may_have_said_the_name() -> None:
    state, nodes = _session()
    doc = GraphNode(kind=NodeKind.ARTIFACT, label="Attached: peru.pdf v1", created_at="2024-01-01T10:03:00")
    state.add_node(doc)
    state.add_edge(GraphEdge(src=doc.node_id, dst=nodes["kyoto"], kind=EdgeKind.REFERENCES))
    _, features = _route(state, "What is the capital of Peru?", Place(), ("Peru",))
    assert Feature.SHIFT not in features[nodes["kyoto"]]
    assert features[nodes["python"]][Feature.SHIFT] == 0.5


def _close(state: SessionState, node: str, cos: float) -> tuple[dict[str, list[float]], list[float]]:
    """Message vectors and a query vector that make ``node``'s turn ``cos`` close to the input in
    meaning and every other turn unrelated (orthogonal)."""
    mids = set(state.turn_messages(node))
    vectors = {m: [1.0, 0.0] if m in mids else [0.0, -1.0] for m in state.messages}
    return vectors, [cos, (1.0 - cos * cos) ** 0.5]


def test_news_of_its_own_after_an_unanswered_yes_no_question_leaves_that_conversation() -> None:
    from app.core.intent.dependence import UNANSWERED

    state, nodes = _session("Here is the draft. Should I mention the deposit too?")
    news = "My sister got engaged in Porto last weekend, we celebrated all night!"
    referent = refer(state, list(nodes.values()), news, {})
    assert referent.asked is None and referent.ignored == state.graph.root_of(nodes["email"])
    vectors, query = _close(state, nodes["email"], 0.35)  # as close as chat on one subject often is
    cands = anchor_candidates(state, vectors, text=news, at="2024-01-01T10:05:00", query_vector=query,
                              place=Place(statement=True))
    features = {c.node_id: dict(c.features) for c in cands}
    assert Feature.REPLY not in features[nodes["email"]]
    assert features[nodes["email"]][Feature.SHIFT] == UNANSWERED
    assert all(Feature.SHIFT not in features[nodes[n]] for n in ("kyoto", "python"))
    assert AnchorRouter(SESSION_DEFAULT).route(cands).new_root
    # the same closeness with an answer to the question (a position, its words) replies to it
    for reply in ("Not yet, let me think about it first.", "I think the deposit can wait."):
        cands = anchor_candidates(state, vectors, text=reply, at="2024-01-01T10:05:00", query_vector=query,
                                  place=Place(statement=True))
        features = {c.node_id: dict(c.features) for c in cands}
        assert features[nodes["email"]][Feature.REPLY] == 1.0 and Feature.SHIFT not in features[nodes["email"]]
        assert AnchorRouter(SESSION_DEFAULT).route(cands).anchor_id == nodes["email"], reply


def test_only_a_statement_that_does_not_lean_on_the_question_leaves_it() -> None:
    state, nodes = _session("Here is the draft. Should I mention the deposit too?")
    news = "My sister got engaged in Porto last weekend, we celebrated all night!"
    for place in (Place(statement=False), Place(statement=True, follow_up=0.3)):
        _, features = _route(state, news, place)
        assert all(Feature.SHIFT not in f for f in features.values()), place
    # a request for work after a yes/no offer says what to do instead: it replies to it
    _, features = _route(state, "Add a paragraph about the parking space.", Place(statement=True, request=True))
    assert features[nodes["email"]][Feature.REPLY] == 1.0 and Feature.SHIFT not in features[nodes["email"]]
    # an open question takes any statement for its answer; its words pointing to the email keep it there
    for last, text in [("Here is the draft. What else should it say?", news),
                       ("Here is the draft. Should I mention it?", "Add that the landlord must fix the heating.")]:
        state, nodes = _session(last)
        _, features = _route(state, text, Place(statement=True))
        assert Feature.SHIFT not in features[nodes["email"]], text
        assert features[nodes["email"]][Feature.REPLY] == 1.0, text
