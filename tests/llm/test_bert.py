"""app.llm.bert: which folders it takes (fast), and on the real all-MiniLM-L6-v2 the same vectors
as sentence-transformers (``model``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from app.llm.bert import BertEncoder, bert_layout
from app.llm.embedder import SentenceEmbedder


def _folder(tmp_path: Path, modules: list[str], pooling: dict[str, bool], config: dict[str, object]) -> Path:
    root = tmp_path / "model"
    (root / "1_Pooling").mkdir(parents=True)
    (root / "modules.json").write_text(json.dumps(
        [{"idx": i, "name": str(i), "path": "" if i == 0 else f"{i}_X", "type": f"sentence_transformers.models.{m}"}
         for i, m in enumerate(modules)]))
    for i in range(1, len(modules)):
        (root / f"{i}_X").mkdir(exist_ok=True)
    (root / "1_X" / "config.json").write_text(json.dumps(pooling))
    (root / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_act": "gelu",
                                                  "max_position_embeddings": 512, **config}))
    (root / "tokenizer.json").write_text("{}")
    return root


MEAN = {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}


def test_a_plain_bert_folder_is_taken_with_its_pooling_and_length(tmp_path: Path) -> None:
    root = _folder(tmp_path, ["Transformer", "Pooling", "Normalize"], MEAN, {})
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256, "do_lower_case": False}))
    layout = bert_layout(root)
    assert layout is not None and layout.pooling == "mean" and layout.max_length == 256
    cls = _folder(tmp_path / "cls", ["Transformer", "Pooling"], {"pooling_mode_cls_token": True}, {})
    assert (bert_layout(cls) or pytest.fail("CLS pooling refused")).pooling == "cls"


@pytest.mark.parametrize(("modules", "pooling", "config"), [
    (["Transformer", "Pooling", "Dense", "Normalize"], MEAN, {}),  # an extra layer it does not run
    (["Transformer", "Pooling"], {"pooling_mode_max_tokens": True}, {}),
    (["Transformer", "Pooling"], {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True}, {}),
    (["Transformer", "Pooling"], MEAN, {"model_type": "mpnet"}),
    (["Transformer", "Pooling"], MEAN, {"position_embedding_type": "relative_key"}),
    (["Transformer", "Pooling"], MEAN, {"hidden_act": "gelu_new"}),
])
def test_any_other_folder_goes_to_sentence_transformers(tmp_path: Path, modules: list[str],
                                                          pooling: dict[str, bool], config: dict[str, object]) -> None:
    assert bert_layout(_folder(tmp_path, modules, pooling, config)) is None


def test_a_default_prompt_or_no_fast_tokenizer_goes_to_sentence_transformers(tmp_path: Path) -> None:
    root = _folder(tmp_path, ["Transformer", "Pooling"], MEAN, {})
    (root / "config_sentence_transformers.json").write_text(json.dumps({"default_prompt_name": "query"}))
    assert bert_layout(root) is None
    (root / "config_sentence_transformers.json").unlink()
    (root / "tokenizer.json").unlink()
    assert bert_layout(root) is None


@pytest.mark.model
def test_the_bundled_model_gives_sentence_transformers_vectors(embed_model_dir: Path) -> None:
    """The same vectors (≤ 1e-5 apart) for short, empty, non-Latin and over-long texts, one at a
    time and in batches of mixed length; and the embedder takes this path for it."""
    import sentence_transformers

    texts = ["What did we decide about the database?", "", "hi", "Ünïcode café 東京 — naïve",
             "word " * 400, *[f"Sentence {i} about topic {i % 5}. " * (1 + i % 9) for i in range(40)]]
    ours = BertEncoder.load(embed_model_dir)
    assert ours is not None and ours.dim == 384
    reference = sentence_transformers.SentenceTransformer(str(embed_model_dir), device="cpu", local_files_only=True)
    want = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(ours.encode(texts, batch_size=16) - want).max() < 1e-5
    assert np.abs(ours.encode(texts[:1], batch_size=1) - want[:1]).max() < 1e-5
    embedder = SentenceEmbedder(embed_model_dir)
    assert embedder.backend == "bert"
    assert np.abs(embedder.embed(texts) - want).max() < 1e-5


@pytest.mark.model
def test_a_folder_it_does_not_take_still_loads_with_sentence_transformers(embed_model_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "max-pooled"
    shutil.copytree(embed_model_dir, copy)
    (copy / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, "pooling_mode_max_tokens": True, "pooling_mode_mean_tokens": False}))
    embedder = SentenceEmbedder(copy)
    assert embedder.backend == "sentence-transformers"
    vectors = embedder.embed(["a short sentence", "another one"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
