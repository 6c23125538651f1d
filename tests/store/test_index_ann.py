"""The search index's approximate (ANN) path on a real LanceDB: flat below the row threshold, an
IVF-PQ index trained by the upkeep from it, exact re-ranking, flat fallback, retraining, folding;
past the threshold a session's vectors held in-process (``app.store.held_vectors``), exact, and
kept in step with the index's writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.llm.fakes import HashEmbedder
from app.store.ann import AnnPolicy, ann_indices
from app.store.index import SearchIndex
from app.store.search_rows import SearchRow

DIM = 64
# held_rows=0: no session is held in-process, so these queries take the ANN path
POLICY = AnnPolicy(min_rows=600, rows_per_partition=200, nprobes=3, refine_factor=10, held_rows=0)
HELD = AnnPolicy(min_rows=600, rows_per_partition=200, nprobes=3, refine_factor=10, held_rows=1000)


def _rows(start: int, n: int, session: str = "s1") -> tuple[list[SearchRow], dict[str, np.ndarray]]:
    rng = np.random.default_rng(start)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = [SearchRow(f"r{start + i}", session, "message", f"row {start + i}", "2026") for i in range(n)]
    return rows, {r.id: v for r, v in zip(rows, vecs)}


def _queries(n: int) -> np.ndarray:
    q = np.random.default_rng(99).normal(size=(n, DIM)).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


@pytest.fixture
def index(tmp_path: Path) -> SearchIndex:
    return SearchIndex(tmp_path / "idx", HashEmbedder(dim=DIM), batch_size=256, optimize_every=100, ann_policy=POLICY)


def test_below_the_threshold_every_query_is_flat(index: SearchIndex) -> None:
    rows, vecs = _rows(0, 500)
    index.add(rows, vectors=vecs)
    assert not any(n.startswith("vector_ann") for n in ann_indices(list(index._lance.table.list_indices())))  # noqa: SLF001
    index.upkeep()
    assert index.vector_path == "flat"
    trace: list[str] = []
    assert len(index.search_vector(_queries(1)[0], k=10, session_id="s1", trace=trace)) == 10
    assert trace == ["flat"]


def test_the_upkeep_trains_an_index_whose_hits_match_the_exact_ones(index: SearchIndex, tmp_path: Path) -> None:
    rows, vecs = _rows(0, 700)
    index.upkeep_driven = True  # the engine's upkeep trains; without an ANN index ``add`` still folds
    index.add(rows, vectors=vecs)
    assert index._unoptimized == 0  # noqa: SLF001
    assert index.upkeep_due() and index.vector_path == "flat"
    assert index.upkeep() == "trained"
    assert index.vector_path == "ann" and not index.upkeep_due()
    found = agree = 0
    for q in _queries(20):
        trace: list[str] = []
        approx = index.search_vector(q, k=10, session_id="s1", kinds=["message", "env"], trace=trace)
        exact = index.search_vector(q, k=10, session_id="s1", kinds=["message", "env"], exact=True)
        assert trace == ["ann"]
        found += len({i for i, _ in approx} & {i for i, _ in exact})
        # re-ranked exactly: a hit both paths return has the same (exact) score
        scores = dict(exact)
        agree += all(abs(s - scores[i]) < 1e-4 for i, s in approx if i in scores)
    assert found / 200 >= 0.95 and agree == 20
    # Another process (or a later start) opening the folder sees the index.
    assert SearchIndex(tmp_path / "idx", HashEmbedder(dim=DIM), ann_policy=POLICY).vector_path == "ann"


def test_rows_written_after_training_are_found_and_folded_in(index: SearchIndex) -> None:
    rows, vecs = _rows(0, 700)
    index.add(rows, vectors=vecs)
    index.upkeep()
    index.upkeep_driven = True
    late, late_vecs = _rows(5000, 150)
    index.add(late, vectors=late_vecs)
    assert index._unoptimized == 150 and index.upkeep_due()  # noqa: SLF001 - left to the upkeep
    target = late_vecs["r5007"]
    assert index.search_vector(target, k=1, session_id="s1")[0][0] == "r5007"  # searched flat beside the index
    assert index.upkeep() == "folded"
    stats = index._lance.table.index_stats(next(iter(ann_indices(list(index._lance.table.list_indices())))))  # noqa: SLF001
    assert stats is not None and stats.num_unindexed_rows == 0
    assert index.search_vector(target, k=1, session_id="s1")[0][0] == "r5007"


def test_a_filter_the_probed_partitions_cannot_fill_is_asked_again_flat(index: SearchIndex) -> None:
    rows, vecs = _rows(0, 700)
    few, few_vecs = _rows(9000, 3, session="small")
    index.add(rows + few, vectors=vecs | few_vecs)
    index.upkeep()
    trace: list[str] = []
    hits = index.search_vector(_queries(1)[0], k=10, session_id="small", trace=trace)
    assert {i for i, _ in hits} == {"r9000", "r9001", "r9002"} and trace == ["flat"]


def test_the_index_is_trained_again_once_the_table_doubled(index: SearchIndex) -> None:
    rows, vecs = _rows(0, 700)
    index.add(rows, vectors=vecs)
    assert index.upkeep().startswith("trained")
    more, more_vecs = _rows(1000, 700)
    index.add(more, vectors=more_vecs)
    assert index.upkeep().startswith("trained")
    assert list(ann_indices(list(index._lance.table.list_indices())).values()) == [1400]  # noqa: SLF001 - the old one dropped


def test_an_upkeep_told_not_to_train_again_folds_and_trains_only_a_first_index(index: SearchIndex) -> None:
    rows, vecs = _rows(0, 700)
    index.upkeep_driven = True
    index.add(rows, vectors=vecs)
    assert index.upkeep_backlog(retrain=False) == 700  # no index yet: a first one is trained all the same
    assert index.upkeep(retrain=False) == "trained"
    more, more_vecs = _rows(1000, 700)
    index.add(more, vectors=more_vecs)  # the table doubled: due to be trained again
    assert index.upkeep(retrain=False) == "folded"
    assert index.upkeep_backlog(retrain=False) == 0  # folded: nothing left but training again
    assert index.upkeep_backlog() == 700  # the rows the index was not trained on
    assert list(ann_indices(list(index._lance.table.list_indices())).values()) == [700]  # noqa: SLF001
    for rid in ("r1005", "r1500"):  # the folded rows are found through the first index
        trace: list[str] = []
        assert index.search_vector(more_vecs[rid], k=5, session_id="s1", trace=trace)[0][0] == rid
        assert trace == ["ann"]
    assert index.upkeep() == "trained"  # the next upkeep trains it again
    assert list(ann_indices(list(index._lance.table.list_indices())).values()) == [1400]  # noqa: SLF001


def _same_as_exact(index: SearchIndex, session: str, *, kinds: list[str] | None = None, since: str | None = None,
                   k: int = 10) -> None:
    for q in _queries(8):
        trace: list[str] = []
        held = index.search_vector(q, k=k, session_id=session, kinds=kinds, since=since, trace=trace)
        exact = index.search_vector(q, k=k, session_id=session, kinds=kinds, since=since, exact=True)
        assert trace == ["held"]
        assert [i for i, _ in held] == [i for i, _ in exact]
        assert np.allclose([s for _, s in held], [s for _, s in exact], atol=1e-5)


def test_past_the_threshold_a_session_is_searched_exactly_in_process(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "idx", HashEmbedder(dim=DIM), batch_size=256, optimize_every=100, ann_policy=HELD)
    rows, vecs = _rows(0, 700)
    other, other_vecs = _rows(3000, 200, session="s2")
    index.add(rows + other, vectors=vecs | other_vecs)
    index.upkeep()
    assert index.vector_path == "ann"
    _same_as_exact(index, "s1")
    _same_as_exact(index, "s2", kinds=["message", "env"], k=300)  # fewer rows than k: all of them
    trace: list[str] = []
    index.search_vector(_queries(1)[0], k=10, session_id="s1", held=False, trace=trace)
    assert trace == ["ann"]
    # The index's own writes carry the copy forward: new rows, a changed row, a removed one, a fold.
    late, late_vecs = _rows(5000, 40)
    moved = {"r3": late_vecs["r5001"]}
    index.add(late + [SearchRow("r3", "s1", "env", "row 3 again", "2027")], vectors=late_vecs | moved)
    index.remove(["r5000", "r10"])
    index.optimize()
    assert index.search_vector(late_vecs["r5007"], k=1, session_id="s1")[0][0] == "r5007"
    assert "r5000" not in {i for i, _ in index.search_vector(late_vecs["r5000"], k=5, session_id="s1")}
    _same_as_exact(index, "s1")
    _same_as_exact(index, "s1", kinds=["env"], k=3)
    _same_as_exact(index, "s1", since="2027")


def test_a_session_bigger_than_the_bound_stays_on_the_ann_path(tmp_path: Path) -> None:
    policy = AnnPolicy(min_rows=600, rows_per_partition=200, nprobes=3, refine_factor=10, held_rows=500)
    index = SearchIndex(tmp_path / "idx", HashEmbedder(dim=DIM), batch_size=256, ann_policy=policy)
    rows, vecs = _rows(0, 700)
    small, small_vecs = _rows(3000, 100, session="s2")
    index.add(rows + small, vectors=vecs | small_vecs)
    index.upkeep()
    for session, path in (("s1", "ann"), ("s2", "held"), ("s1", "ann")):
        trace: list[str] = []
        index.search_vector(_queries(1)[0], k=10, session_id=session, trace=trace)
        assert trace == [path]


def test_the_upkeep_backlog_counts_the_rows_it_has_yet_to_take_in(index: SearchIndex) -> None:
    rows, vecs = _rows(0, 500)
    index.upkeep_driven = True
    index.add(rows, vectors=vecs)
    assert index.upkeep_backlog() == 0  # below the threshold: the writer folds, nothing to train
    rows, vecs = _rows(500, 200)
    index.add(rows, vectors=vecs)
    assert index.upkeep_backlog() == 700  # due for training: every row waits for it
    index.upkeep()
    rows, vecs = _rows(700, 150)
    index.add(rows, vectors=vecs)
    assert index.upkeep_backlog() == 150  # trained: the upkeep folds, these rows wait for it


def test_warming_reads_a_session_s_rows_ahead_of_its_first_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = SearchIndex(tmp_path / "idx", HashEmbedder(dim=DIM), batch_size=256, ann_policy=HELD)
    rows, vecs = _rows(0, 700)
    index.add(rows, vectors=vecs)
    index.upkeep()
    reads: list[str] = []
    load = index._session_rows  # noqa: SLF001
    monkeypatch.setattr(index, "_session_rows", lambda session: reads.append(session) or load(session))
    index.warm("s1")
    assert reads == ["s1"]
    _same_as_exact(index, "s1")  # served from the copy the warm-up read: no second read
    assert reads == ["s1"]
    index.warm("s2")  # a session with no rows, and the memory and full-text reads: nothing fails
