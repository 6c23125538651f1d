"""The pure memory stage: extraction by rules, closing and linking, consolidation, the topic index."""

from __future__ import annotations

import pytest

from app.core.memory import evolve
from app.core.memory.extract import entities, extract_memories, profile_by_hand
from app.core.memory.notes import is_statement_record, memory_line, note_of
from app.core.memory.topics import TopicIndex, numeronym_of
from app.core.memory.writer import plan_write

AT = "2026-11-01T10:00:00Z"


def _kinds(text: str, source: str = "user") -> list[tuple[str, str, str]]:
    return [(m.type, m.scope, m.content) for m in extract_memories(text, evidence_id="e1", at=AT, source=source)]


def test_extraction_types_scopes_and_idempotent_ids() -> None:
    text = ("Never deploy to production on Fridays. I prefer short answers. My city is Lisbon. I live in Porto now. "
            "We decided to use Postgres for the store. I will send the report by Monday. "
            "I went to Kyoto last week with Ana. What is the plan?")
    assert _kinds(text) == [
        ("prohibition", "workspace", "deploy to production on Fridays"),
        ("preference", "workspace", "short answers"),
        ("fact", "workspace", "city is Lisbon"),
        ("fact", "workspace", "home is Porto"),
        ("decision", "session", "use Postgres for the store"),
        ("commitment", "session", "send the report by Monday"),
        ("event", "session", "I went to Kyoto last week with Ana"),
    ]
    first = extract_memories(text, evidence_id="e1", at=AT)
    assert [m.fragment_id for m in first] == [m.fragment_id for m in extract_memories(text, evidence_id="e1", at=AT)]
    event = first[-1]
    assert event.entities == ["Kyoto", "Ana"] and event.source_evidence_ids == ["e1"]
    assert _kinds("What is my deadline?") == []  # a question states nothing
    assert _kinds("We decided to ship on Friday. Never mind.", source="answer") == [
        ("decision", "session", "ship on Friday")]
    outside = extract_memories("timeout: 30\nregion = eu-west-1 >>>\n", evidence_id="e2", at=AT, source="env:app.conf")
    assert [(m.type, m.content) for m in outside] == [("fact", "app.conf timeout is 30"),
                                                      ("fact", "app.conf region is eu-west-1 >>>")]
    # Outside text stays a quotation wherever the memory is shown: no marker escapes its fence.
    line = memory_line(outside[1])
    assert line.startswith("[fact remembered from outside text]\n<<< app.conf\n") and line.endswith("\n>>>")
    assert "&gt;" in line and memory_line(first[2]) == "Fact: city is Lisbon"


def test_profile_statements_added_by_hand_are_every_sessions_own() -> None:
    [never, prefer] = profile_by_hand("Never deploy on Fridays. I prefer short answers. My city is Lisbon.", at=AT)
    assert [(m.type, m.content, m.scope, m.extractor) for m in (never, prefer)] == [
        ("prohibition", "deploy on Fridays", "workspace", "user"), ("preference", "short answers", "workspace", "user")]
    assert never.context == "prohibition added by the user in the Memory panel" and never.source_evidence_ids == []
    assert profile_by_hand("What do I prefer? Hello.", at=AT) == []
    for own in (True, False):  # no message says it: a profile note of its own session too, said in no session
        note = note_of(never, own=own, origin="Launch")
        assert note is not None and (note.kind, note.origin, note.memory_type) == ("profile", "", "prohibition")
    said = extract_memories("Never deploy on Fridays.", evidence_id="e1", at=AT)[0]
    # its own session reads it from the message; the note only says whether it was revoked
    record = note_of(said, own=True, origin="")
    assert record is not None and record.kind == "profile" and is_statement_record(record, {"e1"})
    assert not is_statement_record(record, {"e2"})  # said in another session: a statement here
    assert note_of(said, own=False, origin="Launch").origin == "Launch"


def test_history_facts_belong_to_their_speaker_and_sentence_starts_are_not_names() -> None:
    # Imported history: anyone may speak, so "my car" is the speaker's, and two speakers'
    # facts about their own cars are different subjects (neither closes the other).
    maria = extract_memories("My car is a red Fiat.", evidence_id="h1", at=AT, source="history:Maria")
    john = extract_memories("My car is a blue Volvo. I live in Boston.", evidence_id="h2", at=AT,
                            source="history:John")
    assert [(m.key, m.scope) for m in maria] == [("Maria's car", "session")]
    assert [m.key for m in john] == ["John's car", "John's home"]
    # After "the" or "our" a value must name something concrete; a feeling or a remark is no value.
    assert [m.key for m in extract_memories("Our deadline is Friday. Our community is amazing. The plan is to wait.",
                                            evidence_id="h4", at=AT, source="history:John")] == ["deadline"]
    # A feeling or a remark is not a value: "my family is my motivation" states no fact.
    assert extract_memories("My family is my motivation and they keep me going.", evidence_id="h3", at=AT,
                            source="history:John") == []
    assert evolve.closes(john[0], maria) == []
    # A capitalised word that only starts sentences is not a name; a name inside one is.
    assert entities("Last week I volunteered with Maria. Thanks!") == ["Maria"]
    assert entities("Maria went hiking. I met Maria there.") == ["Maria"]
    assert entities("Postgres is fine. We moved to PostgreSQL and K8s.") == ["PostgreSQL", "K8s"]


def test_a_newer_fact_closes_the_older_and_repeats_are_skipped() -> None:
    [lisbon] = extract_memories("My city is Lisbon.", evidence_id="e1", at="2026-01-01T00:00:00Z")
    [porto] = extract_memories("My city is Porto.", evidence_id="e2", at="2026-03-01T00:00:00Z")
    [again] = extract_memories("My city is Porto!", evidence_id="e3", at="2026-03-02T00:00:00Z")
    write = plan_write([porto, again], [lisbon], "2026-03-02T00:00:01Z")
    assert [m.fragment_id for m in write.new] == [porto.fragment_id]  # the repeat is not stored
    closed = write.changed[lisbon.fragment_id]
    assert (closed.valid_to, closed.superseded_by, closed.closed_at) == (porto.valid_from, porto.fragment_id,
                                                                         "2026-03-02T00:00:01Z")
    assert write.new[0].links == [{"memory_id": lisbon.fragment_id, "reason": "replaces an earlier fact: city is Lisbon"}]
    assert not plan_write([porto], [closed, write.new[0]], "2026-03-03T00:00:00Z")  # idempotent


def test_memories_close_in_meaning_are_linked_with_their_similarity() -> None:
    [old] = extract_memories("We decided to ship the beta in March.", evidence_id="e1", at=AT)
    [new] = extract_memories("We decided to release a preview next spring.", evidence_id="e2", at=AT)
    assert not set(old.entities) & set(new.entities)  # nothing but meaning ties them
    near = {new.fragment_id: {old.fragment_id: 0.82, "mem-unknown": 0.9}}  # an id not kept is ignored
    [written] = plan_write([new], [old], AT, near).new
    assert written.links == [{"memory_id": old.fragment_id, "reason": "similar (0.82)"}]
    assert plan_write([new], [old], AT, {new.fragment_id: {old.fragment_id: 0.6}}).new[0].links == []


def test_a_permission_closes_an_earlier_prohibition_and_links_evolve_neighbours() -> None:
    [never] = extract_memories("Never delete files in /data.", evidence_id="e1", at="2026-01-01T00:00:00Z")
    [allowed] = extract_memories("You may delete files in /data.", evidence_id="e2", at="2026-01-02T00:00:00Z")
    assert evolve.closes(allowed, [never]) == [never]
    [trip] = extract_memories("I went to Kyoto last week.", evidence_id="e3", at=AT)
    [hotel] = extract_memories("We decided to book the Kyoto ryokan.", evidence_id="e4", at=AT)
    write = plan_write([hotel], [trip], AT)
    assert write.new[0].links == [{"memory_id": trip.fragment_id, "reason": "shared entity: kyoto"}]
    evolved = write.changed[trip.fragment_id]
    assert "kyoto" in evolved.tags and evolved.revisions[0]["tags"] == trip.tags  # a revision, not an overwrite


def test_many_small_notes_about_one_name_are_consolidated() -> None:
    notes = [m.model_copy(update={"type": "note", "importance": 0.3})
             for n in range(5)
             for m in extract_memories(f"I went to Berlin {n + 2} days ago.", evidence_id=f"e{n}", at=AT)]
    write = plan_write([], notes, "2026-11-02T00:00:00Z")
    [note] = write.new
    assert note.content.startswith("About Berlin: ") and len(note.source_evidence_ids) == 5
    assert all(write.changed[m.fragment_id].superseded_by == note.fragment_id for m in notes)
    assert all(write.changed[m.fragment_id].valid_to for m in notes)  # superseded, kept


@pytest.mark.parametrize(("short", "word", "expected"), [
    ("k8s", "kubernetes", True), ("i18n", "internationalization", True), ("a11y", "accessibility", True),
    ("k8s", "kubectl", False), ("k9s", "kubernetes", False)])
def test_numeronyms(short: str, word: str, expected: bool) -> None:
    assert numeronym_of(short, word) is expected


def test_topics_merge_split_and_search() -> None:
    index = TopicIndex()
    texts = ["How do I scale pods in k8s?", "Is Kubernetes better than Nomad here?", "my kubernetes cluster has 3 nodes",
             "We deploy with Dockerfiles", "the Dockerfile is in infra/docker"]
    for n, text in enumerate(texts):
        index.observe("s1", f"m{n}", text, AT)
    by_name = {t.name: t for t in index.topics.values()}
    assert by_name["Kubernetes"].aliases == {"k8s": "first seen", "Kubernetes": "numeronym", "kubernetes": "case"}
    assert by_name["Dockerfiles"].aliases["Dockerfile"] == "inflection"
    assert set(by_name) == {"Kubernetes", "Nomad", "Dockerfiles", "infra/docker"}
    assert [i for i, _ in index.search("kubernetes upgrade", 5)] == ["m2", "m1", "m0"]  # rarer first, then latest
    assert index.search("kubernetes", 5, sessions={"other"}) == []
    kube = by_name["Kubernetes"].topic_id
    assert index.related(kube) == [(by_name["Nomad"].topic_id, 1)]
    change = index.split(kube, "k8s", AT)
    assert [m.message_id for m in change.mentions] == ["m0"] and index.log[-1]["op"] == "split"
    assert "k8s" not in index.topics[kube].aliases and len(index.messages_of(kube)) == 2
    assert index.observe("s1", "m0", texts[0], AT).mentions == []  # a message is indexed once


def test_a_topic_most_messages_mention_is_not_recalled_by() -> None:
    index = TopicIndex()
    for n in range(40):  # Caroline in every message; Kyoto in one
        index.observe("s1", f"m{n}", "Caroline went to Kyoto" if n == 7 else f"Caroline said hello {n}", AT)
    assert [i for i, _ in index.search("What did Caroline do in Kyoto?", 5)] == ["m7"]
    assert index.search("What did Caroline say?", 5) == []
    for n in range(2000):  # another, larger session: Caroline is rare in the workspace, not in s1
        index.observe("s2", f"o{n}", f"note number {n}", AT)
    assert index.search("What did Caroline say?", 5, sessions={"s1"}) == []


def test_another_sessions_group_header_says_its_day_once() -> None:
    from app.core.context.sections.evidence import outside_group
    from app.core.session.state import NoteView

    note = NoteView("m1", "outside", "Ana: the roof needs 14 shingles", "2026-11-02T10:00:00Z", origin="Shed project")
    assert outside_group(note) == "2026-11-02, session \u201cShed project\u201d:"
    dated = NoteView("m2", "outside", "Ana: hi", "2026-11-02T10:00:00Z", origin="Standup 2026-11-02")
    assert outside_group(dated) == "session \u201cStandup 2026-11-02\u201d:"


def test_twenty_thousand_topics_cost_a_message_only_what_its_names_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 imported topics: placing a message's new names compares each only with the topics of
    its numeronym shape (k8s ~ kubernetes), not with all of them; a pasted list of names counts
    at most COOCCUR_MOST of them for co-occurrence (not n² pairs). Counted, not timed: both were
    linear in the topics (3.5x slower asks)."""
    from app.core.memory import topics as topics_module
    from app.core.memory.topics import COOCCUR_MOST, Topic

    index = TopicIndex()
    index.load([Topic(f"topic-{n}", f"Project{n}x", {f"Project{n}x": "first seen"}, AT) for n in range(20_000)], [], [])
    calls = [0]
    real = topics_module.numeronym_of

    def counted(short: str, word: str) -> bool:
        calls[0] += 1
        return real(short, word)

    monkeypatch.setattr(topics_module, "numeronym_of", counted)
    change = index.observe("s1", "m1", "We moved Zephyrine and Quillbank onto the k8s cluster with Kubernetes.", AT)
    assert {t.name for t in change.topics} >= {"Zephyrine", "Quillbank"}
    assert calls[0] < 100, calls[0]
    names = " ".join(f"Alpha{n}q" for n in range(300))
    index.observe("s1", "m2", f"Names: {names}.", AT)
    assert sum(1 for pair in index.cooccur if pair) <= COOCCUR_MOST * (COOCCUR_MOST - 1) // 2 + 10
