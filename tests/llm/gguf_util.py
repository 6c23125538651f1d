"""Build small GGUF files byte by byte, for tests of the validator (no llama.cpp needed)."""

from __future__ import annotations

import struct
from pathlib import Path

_STRING, _ARRAY, _U32 = 8, 9, 4


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(value: object) -> bytes:
    if isinstance(value, bytes):  # already encoded: type and payload
        return value
    if isinstance(value, bool):
        return struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return struct.pack("<I", _U32) + struct.pack("<I", value)
    if isinstance(value, float):
        return struct.pack("<If", 6, value)
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return struct.pack("<IIQ", _ARRAY, _STRING, len(value)) + b"".join(_string(v) for v in value)
    if isinstance(value, list):
        return struct.pack("<IIQ", _ARRAY, 5, len(value)) + b"".join(struct.pack("<i", v) for v in value)
    raise TypeError(value)


def gguf_bytes(
    *,
    metadata: dict[str, object] | None = None,
    tensors: list[tuple[str, tuple[int, ...]]] | None = None,
    version: int = 3,
    alignment: int = 32,
) -> bytes:
    """A complete little-endian GGUF v3 file with F32 tensors filled with zeros."""
    metadata = {"general.architecture": "pcmtest", "general.name": "tiny", **(metadata or {})}
    tensors = tensors if tensors is not None else [("weight", (8, 4)), ("bias", (8,))]
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata)))
    for key, value in metadata.items():
        out += _string(key) + _value(value)
    offset = 0
    sizes = []
    for name, dims in tensors:
        out += _string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, offset)  # type F32
        size = 4
        for d in dims:
            size *= d
        sizes.append(size)
        offset += -(-size // alignment) * alignment
    out += b"\0" * (-len(out) % alignment)
    for size in sizes:
        out += b"\0" * (-(-size // alignment) * alignment)
    return bytes(out)


def write_gguf(path: Path, **kwargs: object) -> Path:
    """Write ``gguf_bytes(**kwargs)`` to ``path`` and return it."""
    path.write_bytes(gguf_bytes(**kwargs))  # type: ignore[arg-type]
    return path


# --------------------------------------------------------------------------- rewriting a real file

_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _skip_value(buf: bytes, pos: int, vtype: int) -> int:
    """The position after one metadata value of type ``vtype`` starting at ``pos``."""
    if vtype in _SCALAR_SIZES:
        return pos + _SCALAR_SIZES[vtype]
    if vtype == _STRING:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    item_type, count = struct.unpack_from("<IQ", buf, pos)
    pos += 12
    if item_type in _SCALAR_SIZES:
        return pos + count * _SCALAR_SIZES[item_type]
    for _ in range(count):
        pos = _skip_value(buf, pos, item_type)
    return pos


def nested_array(depth: int) -> bytes:
    """A metadata value (type and payload) of arrays nested ``depth`` deep, the innermost empty."""
    return struct.pack("<I", _ARRAY) + struct.pack("<IQ", _ARRAY, 1) * (depth - 1) + struct.pack("<IQ", _U32, 0)


def rewrite_gguf(
    src: Path,
    dst: Path,
    *,
    strings: dict[str, str] | None = None,
    raw: dict[str, bytes] | None = None,
    drop: tuple[str, ...] = (),
    garbage_weights: int | None = None,
) -> Path:
    """Copy the GGUF ``src`` to ``dst`` with metadata changed: ``strings`` set as string values,
    ``raw`` set as already-encoded values (type + payload), ``drop`` removed. With
    ``garbage_weights`` (a seed) every tensor's data is replaced by random bytes: the structure
    stays valid, the weights are noise."""
    import random

    buf = src.read_bytes()
    version, tensor_count, kv_count = struct.unpack_from("<IQQ", buf, 4)
    pos = 24
    kept: list[bytes] = []
    alignment = 32
    for _ in range(kv_count):
        start = pos
        (n,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8 : pos + 8 + n].decode("utf-8")
        pos += 8 + n
        (vtype,) = struct.unpack_from("<I", buf, pos)
        end = _skip_value(buf, pos + 4, vtype)
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, pos + 4)
        if key not in drop and key not in (strings or {}) and key not in (raw or {}):
            kept.append(buf[start:end])
        pos = end
    for key, text in (strings or {}).items():
        kept.append(_string(key) + struct.pack("<I", _STRING) + _string(text))
    for key, value in (raw or {}).items():
        kept.append(_string(key) + value)
    tensors_start = pos
    for _ in range(tensor_count):
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + n
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + 8 * n_dims + 4 + 8
    tensor_info = buf[tensors_start:pos]
    data = buf[-(-pos // alignment) * alignment :]
    if garbage_weights is not None:
        data = random.Random(garbage_weights).randbytes(len(data))
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, tensor_count, len(kept)))
    for item in kept:
        out += item
    out += tensor_info
    out += b"\0" * (-len(out) % alignment)
    dst.write_bytes(bytes(out) + data)
    return dst
