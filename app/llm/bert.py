"""A BERT sentence encoder in plain torch: what sentence-transformers computes for a folder that
holds a BERT encoder, mean or CLS pooling and (optionally) normalisation, without importing
sentence-transformers, transformers or scikit-learn.

Why: importing sentence-transformers takes about 5 s on this machine (it pulls transformers and
scikit-learn), against about 1.3 s for torch alone, and every start of the app and of ``pcm mcp``
waits for the embedder. The vectors are the same (within 1e-6; ``tests/llm/test_bert.py`` compares
them with sentence-transformers' on the bundled model).

``BertEncoder.load`` returns None for a folder it does not reproduce exactly (another architecture,
a Dense or other extra module, a default prompt, max pooling, no ``tokenizer.json``): the caller
then loads it with sentence-transformers. It raises ``ValueError`` when a folder that claims this
layout has weights it cannot read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_POOLING_MODES = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                  "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                  "pooling_mode_lasttoken")


@dataclass(frozen=True)
class BertLayout:
    """What a folder must say for ``BertEncoder`` to reproduce it."""

    encoder_dir: Path  # the Transformer module's folder: config.json, tokenizer.json, weights
    config: dict[str, Any]
    pooling: str  # "mean" or "cls"
    max_length: int
    lower_case: bool


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _pooling_mode(path: Path) -> str | None:
    config = _json(path / "config.json")
    if not isinstance(config, dict):
        return None
    chosen = [mode for mode in _POOLING_MODES if config.get(mode)]
    return {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}.get(chosen[0]) \
        if len(chosen) == 1 else None


def bert_layout(folder: str | Path) -> BertLayout | None:
    """The folder's layout when it is a plain BERT sentence encoder, else None."""
    root = Path(folder)
    modules = _json(root / "modules.json")
    if not isinstance(modules, list) or not modules:
        return None
    types = [m.get("type") for m in modules if isinstance(m, dict)]
    if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
        return None
    encoder_dir = root / str(modules[0].get("path") or "")
    pooling = _pooling_mode(root / str(modules[1].get("path") or ""))
    config = _json(encoder_dir / "config.json")
    st_config = _json(encoder_dir / "sentence_bert_config.json") or _json(root / "sentence_bert_config.json") or {}
    card = _json(root / "config_sentence_transformers.json") or {}
    if (pooling is None or not isinstance(config, dict) or config.get("model_type") != "bert"
            or config.get("position_embedding_type", "absolute") != "absolute"
            or config.get("hidden_act") != "gelu" or card.get("default_prompt_name")
            or not (encoder_dir / "tokenizer.json").is_file()):
        return None
    max_length = int(st_config.get("max_seq_length") or config.get("max_position_embeddings") or 512)
    return BertLayout(encoder_dir, config, pooling, min(max_length, int(config.get("max_position_embeddings", 512))),
                      bool(st_config.get("do_lower_case")))


def _weights(encoder_dir: Path) -> dict[str, Any]:
    if (encoder_dir / "model.safetensors").is_file():
        from safetensors.torch import load_file

        found = load_file(str(encoder_dir / "model.safetensors"))
    else:
        import torch

        found = torch.load(encoder_dir / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return {name.removeprefix("bert."): tensor.float() for name, tensor in found.items()}


class BertEncoder:
    """The forward pass of a BERT encoder plus pooling, on CPU, in inference mode."""

    def __init__(self, layout: BertLayout) -> None:
        import torch
        from tokenizers import Tokenizer

        config = layout.config
        self.layout = layout
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.pad_id = int(config.get("pad_token_id") or 0)
        weights = _weights(layout.encoder_dir)
        try:
            embeddings = [weights[f"embeddings.{n}.weight"] for n in
                          ("word_embeddings", "position_embeddings", "token_type_embeddings")]
            self._embeddings = (*embeddings, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
            self._layers = [self._layer(weights, f"encoder.layer.{i}.", torch)
                            for i in range(int(config["num_hidden_layers"]))]
        except KeyError as missing:
            raise ValueError(f"the weights lack {missing.args[0]}") from None
        self.dim = int(self._embeddings[0].shape[1])
        tokenizer = Tokenizer.from_file(str(layout.encoder_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(layout.max_length)
        self._tokenizer = tokenizer

    @staticmethod
    def _layer(weights: dict[str, Any], prefix: str, torch: Any) -> tuple[Any, ...]:
        def w(name: str) -> Any:
            return weights[prefix + name]

        attention = ("query", "key", "value")
        return (
            torch.cat([w(f"attention.self.{n}.weight") for n in attention]),
            torch.cat([w(f"attention.self.{n}.bias") for n in attention]),
            w("attention.output.dense.weight"), w("attention.output.dense.bias"),
            w("attention.output.LayerNorm.weight"), w("attention.output.LayerNorm.bias"),
            w("intermediate.dense.weight"), w("intermediate.dense.bias"),
            w("output.dense.weight"), w("output.dense.bias"),
            w("output.LayerNorm.weight"), w("output.LayerNorm.bias"),
        )

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """L2-normalised float32 rows, one per text; batches of similar length (less padding)."""
        import torch

        if self.layout.lower_case:
            texts = [t.lower() for t in texts]
        encoded = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
        out = np.empty((len(encoded), self.dim), dtype=np.float32)
        for start in range(0, len(order), max(1, batch_size)):
            rows = order[start:start + max(1, batch_size)]
            width = len(encoded[rows[0]])
            ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.bool)
            for r, i in enumerate(rows):
                ids[r, :len(encoded[i])] = torch.tensor(encoded[i], dtype=torch.long)
                mask[r, :len(encoded[i])] = True
            out[rows] = self._forward(ids, mask).numpy()
        return out

    def _forward(self, ids: Any, mask: Any) -> Any:
        import torch
        import torch.nn.functional as F

        words, positions, types, norm_w, norm_b = self._embeddings
        batch, width = ids.shape
        dim, heads = self.dim, self.heads
        with torch.inference_mode():
            x = words[ids] + positions[:width] + types[0]
            x = F.layer_norm(x, (dim,), norm_w, norm_b, self.eps)
            attend = mask[:, None, None, :]
            for (qkv_w, qkv_b, out_w, out_b, ln1_w, ln1_b, up_w, up_b, down_w, down_b, ln2_w, ln2_b) in self._layers:
                q, k, v = F.linear(x, qkv_w, qkv_b).view(batch, width, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
                context = F.scaled_dot_product_attention(q, k, v, attn_mask=attend)
                context = context.transpose(1, 2).reshape(batch, width, dim)
                x = F.layer_norm(F.linear(context, out_w, out_b) + x, (dim,), ln1_w, ln1_b, self.eps)
                x = F.layer_norm(F.linear(F.gelu(F.linear(x, up_w, up_b)), down_w, down_b) + x, (dim,),
                                 ln2_w, ln2_b, self.eps)
            if self.layout.pooling == "cls":
                pooled = x[:, 0]
            else:
                keep = mask[..., None].to(x.dtype)
                pooled = (x * keep).sum(1) / keep.sum(1).clamp(min=1e-9)
            return F.normalize(pooled, dim=1)

    @classmethod
    def load(cls, folder: str | Path) -> BertEncoder | None:
        """The encoder of ``folder``, or None when it is not a plain BERT sentence encoder."""
        layout = bert_layout(folder)
        return cls(layout) if layout is not None else None
