"""``pcm eval answers``' reusable parts (``app.eval.answers``): scoring, gold answers, the answer
cache, the paired bootstrap; and a whole run on a tiny LoCoMo-format folder with two scripted
models over the same contexts (real SQLite + LanceDB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.engine.facade import Engine
from app.eval import answers as ev
from app.llm.fakes import ScriptedChatModel
from tests.conftest import EngineFactory


def test_token_f1_exact_and_abstention() -> None:
    assert ev.token_f1("She went on 7 May 2023.", "7 May 2023") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert ev.token_f1("The Psychology", "psychology") == 1.0  # case, punctuation and articles dropped
    assert ev.token_f1("", "x") == 0.0 and ev.token_f1("cats", "dogs") == 0.0
    assert ev.is_date_or_number("7 May 2023") and ev.is_date_or_number("2022") and ev.is_date_or_number("3")
    assert ev.is_date_or_number("The sunday before 25 May 2023") and not ev.is_date_or_number("Psychology")
    assert ev.exact_match("She went on 7 May 2023.", "7 May 2023") == 1.0
    assert ev.exact_match("She went on 17 May 2023.", "7 May 2023") == 0.0  # on word boundaries
    assert ev.abstained("That is not mentioned in the conversation.") and not ev.abstained("Yes, in May.")


def test_paired_bootstrap_gives_the_difference_and_an_interval() -> None:
    a, b = [0.0, 0.2, 0.1, 0.0, 0.3] * 8, [0.5, 0.6, 0.4, 0.7, 0.5] * 8
    got = ev.paired_bootstrap(a, b, rounds=500)
    assert got["diff"] == pytest.approx(0.42) and got["low"] <= 0.42 <= got["high"] and got["low"] > 0.3
    assert got["p_b_better"] == 1.0
    same = ev.paired_bootstrap(a, a, rounds=200)
    assert same["diff"] == same["low"] == same["high"] == 0.0
    with pytest.raises(ValueError):
        ev.paired_bootstrap([1.0], [1.0, 2.0])


def test_gold_answers_come_from_the_question_or_locomos_original(tmp_path: Path) -> None:
    questions = [{"qid": "c1#0", "conversation": "c1", "question": "When?"},
                 {"qid": "c1#1", "conversation": "c1", "question": "Changed question?"},
                 {"qid": "c1#2", "conversation": "c1", "question": "Own?", "answer": 2022}]
    original = tmp_path / "locomo10.json"
    original.write_text(json.dumps([{"sample_id": "c1", "qa": [
        {"question": "When?", "answer": "7 May 2023"}, {"question": "Other?", "answer": "x"},
        {"question": "Own?", "answer": "ignored"}]}]), encoding="utf-8")
    assert ev.gold_answers(questions, original) == {"c1#0": "7 May 2023", "c1#1": None, "c1#2": "2022"}
    assert ev.spread_sample(list(range(10)), 4) == [0, 2, 5, 7] and ev.spread_sample([1, 2], None) == [1, 2]


def test_the_cache_is_keyed_by_context_model_and_parameters(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    cache = ev.AnswerCache(path)
    key = ev.AnswerCache.key("ctx", "m", ev.DEFAULT_PARAMS)
    assert key != ev.AnswerCache.key("ctx", "other", ev.DEFAULT_PARAMS)
    assert key != ev.AnswerCache.key("ctx", "m", ev.DEFAULT_PARAMS.model_copy(update={"max_tokens": 9}))
    assert cache.get(key) is None
    cache.put(key, {"text": "hi"})
    again = ev.AnswerCache(path)  # read back from disk
    assert again.get(key)["text"] == "hi" and (again.hits, again.misses) == (1, 0)


def _dataset(folder: Path) -> Path:
    folder.mkdir()
    lines = [{"conversation": "c1", "id": f"c1/D1:{n}", "ts": f"2023-05-0{1 + n // 4}T10:00:{n:02d}",
              "author": "Ana" if n % 2 == 0 else "Bo",
              "text": ["I went to the pottery class on 7 May 2023.", "Nice, what did you make?",
                       "A black and white bowl.", "I painted a sunrise in 2022."][n % 4]} for n in range(8)]
    (folder / "messages.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    questions = [
        {"qid": "c1#0", "conversation": "c1", "question": "When did Ana go to the pottery class?",
         "gold": ["c1/D1:0"], "category": "temporal", "answer": "7 May 2023"},
        {"qid": "c1#1", "conversation": "c1", "question": "What did Ana make?", "gold": ["c1/D1:2"],
         "category": "single-hop", "answer": "a black and white bowl"},
        {"qid": "c1#2", "conversation": "c1", "question": "Did Bo fly to Mars?", "gold": [],
         "category": "adversarial"},
    ]
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")
    return folder


def test_two_models_answer_the_same_contexts_and_are_compared(make_engine: EngineFactory, tmp_path: Path) -> None:
    data = _dataset(tmp_path / "tiny")
    cache = ev.AnswerCache(tmp_path / "cache.jsonl")
    good = ScriptedChatModel(["On 7 May 2023.", "A black and white bowl.", "That is not mentioned."], name="good")
    bad = ScriptedChatModel(["Yesterday.", "A painting.", "Yes, to Mars."], name="bad")

    async def body(engine: Engine) -> list[ev.Asked]:
        return await ev.compile_questions(engine, data, 256)

    asked = make_engine.run(body)
    assert [a.qid for a in asked] == ["c1#0", "c1#1", "c1#2"]
    assert all(ev.INSTRUCTION in a.prompt[0]["content"] for a in asked), "the short-answer instruction is sent"
    runs = [ev.run_model("bad", bad, asked, cache), ev.run_model("good", good, asked, cache)]
    rep = ev.report(runs, asked, 256, cache)
    assert (rep["model"], rep["n"], rep["f1"], rep["exact"]) == ("bad", 2, 0.0, 0.0)
    best = rep["runs"][1]
    assert best["f1"] == pytest.approx((2 * 0.75 * 1 / 1.75 + 1.0) / 2, abs=1e-3) and best["exact"] == 1.0
    assert best["by_category"]["adversarial"]["abstained"] == 1.0 and best["adversarial_abstained"] == 1.0
    assert best["by_category"]["temporal"]["exact"] == 1.0 and best["by_category"]["single-hop"]["exact"] is None
    pair = rep["paired"][0]
    assert pair["a"] == "bad" and pair["b"] == "good" and pair["f1"]["diff"] > 0.5 and pair["f1"]["n"] == 2
    assert best["first_token_ms"]["p50"] is not None
    text = ev.format_answer_report(rep)
    assert "good − bad f1" in text and "adversarial" in text
    again = ev.run_model("good", ScriptedChatModel(["something else"], name="good"), asked, cache)
    assert [r["answer"] for r in again.rows] == [r["answer"] for r in runs[1].rows], "answered from the cache"
    assert cache.hits == 3
