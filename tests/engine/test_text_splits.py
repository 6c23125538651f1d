"""Following one input from ``Engine.submit`` to the compiled prompt (and the memory written
after it): the input is split into words once per tokenizer variant that reads it, not once per
stage (issue 30). Each variant's rule (``app.core.text.words``) is wrapped to count the splits
of any text that is the input up to white space; real SQLite + LanceDB, the scripted fakes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from app.core.engine.context import EngineConfig
from app.core.engine.facade import Engine
from app.core.text import words
from tests.conftest import EngineFactory
from tests.texts import long_paste

#: An input with a request formula, a line break, runs of spaces and a typographic apostrophe:
#: intent reads it folded, routing and recall as written.
INPUT = "Please check why the deploy\n\nscript   crashes: Bob\u2019s build failed and the logs are gone?"


@pytest.fixture
def splits(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Counter[str], list[str]]]:
    """(splits of the watched texts by tokenizer name, the watched texts' folded forms)."""
    calls: Counter[str] = Counter()
    watched: list[str] = []

    def counting(name: str, rule):  # type: ignore[no-untyped-def]
        def counted(text: str):  # type: ignore[no-untyped-def]
            if words._default_fold(text) in watched:
                calls[name] += 1
            return rule(text)
        return counted

    for tok in vars(words).values():
        if isinstance(tok, words.Tokenizer):
            monkeypatch.setattr(tok, "rule", counting(tok.name, tok.rule))
            tok.forget()
    monkeypatch.setattr(words, "_spaced_rule", counting("spaced", words._spaced_rule))
    words.spaced_spans.cache_clear()
    words._content_stems.cache_clear()
    yield calls, watched


async def _session(engine: Engine) -> str:
    state = await engine.open_session(None)
    for said in ("The deploy script lives in deploy.sh, Bob wrote it.",
                 "Bob: the build crashed again on the failing test, see the logs."):
        await (await engine.submit(state.session_id, said)).done
    return state.session_id


def test_an_input_is_split_once_by_each_tokenizer_that_reads_it(
        make_engine: EngineFactory, splits: tuple[Counter[str], list[str]]) -> None:
    calls, watched = splits

    async def body(engine: Engine) -> None:
        session_id = await _session(engine)
        watched.append(words._default_fold(INPUT))
        record = await (await engine.submit(session_id, INPUT)).done
        assert record.build.text == INPUT and record.build.recall.channels  # built, recalled, answered

    make_engine.run(body)  # closed when done: the memory written after the answer is waited for
    # intent, plan, tools, retrieval's key test: one split; anchor routing (every speaker's
    # mention, the keyword overlap): one; the gate and compression: one; the topic channel's
    # query and the topic index reading the stored message: one each.
    assert dict(calls) == {"default": 1, "routing": 1, "ranking": 1, "topic terms": 1, "topic words": 1}


def test_a_long_input_is_cut_from_one_split(make_engine: EngineFactory,
                                             splits: tuple[Counter[str], list[str]]) -> None:
    calls, watched = splits
    paste = long_paste(3000)
    config = EngineConfig(default_budget=1024, context_size=2048, answer_reserve=256, llm_intent="off")

    async def body(engine: Engine) -> None:
        session_id = await _session(engine)
        watched.append(words._default_fold(paste))
        record = await (await engine.submit(session_id, paste)).done
        shortened = record.build.input.shortened
        assert shortened is not None and shortened.cut_words > 0 and shortened.related

    make_engine.run(body, config=config)
    # the sentences, the marker's count, the cut runs' counts: one white-space split
    assert calls["spaced"] == 1
    assert all(n == 1 for n in calls.values()), calls
