"""Build small GGUF files byte by byte, for tests of the validator (no llama.cpp needed)."""

from __future__ import annotations

import struct
from pathlib import Path

_STRING, _ARRAY, _U32 = 8, 9, 4


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(value: object) -> bytes:
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
