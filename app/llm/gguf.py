"""Safe checks of GGUF model files, before llama.cpp ever sees them.

llama.cpp aborts the whole process on some malformed files, so a file is checked in two steps:

* ``validate_gguf`` (in-process, cheap, pure Python): the file exists, starts with ``b'GGUF'``, has a
  supported version, its header parses, and it is at least as long as the tensor data the header
  declares (this catches truncated downloads).
* ``probe_gguf`` (optional, a child process): loads the file with llama.cpp and decodes a few
  tokens; a crash or error in the child becomes a one-line ``ModelError`` here.

Every failure is a ``ModelError`` whose message is one line naming the file and the fix.
"""

from __future__ import annotations

import errno
import mmap
import os
import signal
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.core.errors import ModelError
from app.frozen import child_options, python_command
from app.llm.template import ChatTemplates, template_sources

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
FIX_HINT = "pick a .gguf model or run `pcm models fetch`"

# ggml_type id -> (elements per block, bytes per block), after gguf-py's GGML_QUANT_SIZES.
# A type missing here is tolerated: its tensor only contributes its start offset to the size check.
GGML_TYPE_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    9: (32, 36),  # Q8_1
    10: (256, 84),  # Q2_K
    11: (256, 110),  # Q3_K
    12: (256, 144),  # Q4_K
    13: (256, 176),  # Q5_K
    14: (256, 210),  # Q6_K
    15: (256, 292),  # Q8_K
    16: (256, 66),  # IQ2_XXS
    17: (256, 74),  # IQ2_XS
    18: (256, 98),  # IQ3_XXS
    19: (256, 50),  # IQ1_S
    20: (32, 18),  # IQ4_NL
    21: (256, 110),  # IQ3_S
    22: (256, 82),  # IQ2_S
    23: (256, 136),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (256, 56),  # IQ1_M
    30: (1, 2),  # BF16
    34: (256, 54),  # TQ1_0
    35: (256, 66),  # TQ2_0
    39: (32, 17),  # MXFP4
}

# GGUF metadata value types: fixed sizes; 8 = string, 9 = array.
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 4
_MAX_COUNT = 1 << 24  # sanity bound on tensor / key counts and array lengths of "scalars"
_MAX_ARRAY_DEPTH = 16


def display_path(path: Path) -> str:
    """The path as a user would type it: relative to the working directory when under it.

    Symbolic links are not followed (a link loop must not stop a message from naming it)."""
    try:
        return str(Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(Path.cwd()))))
    except (ValueError, OSError, RuntimeError):
        return str(path)


def link_problem(path: Path) -> str | None:
    """Why ``path`` cannot be opened through its symbolic links, as a phrase ("is a symbolic link
    loop", "is a symbolic link to X, which does not exist"), or None when it can (or is no link)."""
    try:
        os.stat(path)
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop (too many levels of symbolic links)"
        if isinstance(exc, FileNotFoundError) and os.path.islink(path):
            try:
                return f"is a symbolic link to {os.readlink(path)}, which does not exist"
            except OSError:
                return "is a broken symbolic link"
        return None


@dataclass
class GgufInfo:
    """What the header of a GGUF file declares (only the parts the checks need)."""

    version: int
    tensor_count: int
    kv_count: int
    alignment: int
    data_offset: int  # where tensor data starts
    required_size: int  # data_offset + end of the last tensor's data
    file_size: int
    metadata: dict[str, object] = field(default_factory=dict)  # scalar and string values only


class _Truncated(Exception):
    """The header runs past the end of the file."""


class _Malformed(Exception):
    """The header is not what GGUF allows."""


class _Reader:
    """Bounds-checked little-endian reads over a memory map."""

    def __init__(self, buf: mmap.mmap | bytes, size: int) -> None:
        self.buf = buf
        self.size = size
        self.pos = 0

    def take(self, n: int) -> int:
        if n < 0 or self.pos + n > self.size:
            raise _Truncated
        start = self.pos
        self.pos += n
        return start

    def u32(self) -> int:
        return struct.unpack_from("<I", self.buf, self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack_from("<Q", self.buf, self.take(8))[0]

    def string(self) -> str:
        n = self.u64()
        start = self.take(n)
        return bytes(self.buf[start : start + n]).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.take(self.u64())

    def scalar(self, vtype: int) -> object:
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}[vtype]
        return struct.unpack_from(fmt, self.buf, self.take(_SCALAR_SIZES[vtype]))[0]


def _name(key: str) -> str:
    """A metadata key as a message shows it: quoted, escaped, at most 60 characters."""
    return repr(key if len(key) <= 60 else key[:59] + "…")


def _read_value(reader: _Reader, vtype: int, key: str) -> object:
    """Read (or skip, for arrays) one metadata value of ``key``; arrays come back as None."""
    if vtype in _SCALAR_SIZES:
        return reader.scalar(vtype)
    if vtype == _STRING:
        return reader.string()
    if vtype == _ARRAY:
        _skip_array(reader, key)
        return None
    raise _Malformed(f"unknown metadata value type {vtype} of key {_name(key)}")


def _skip_items(reader: _Reader, item_type: int, count: int, key: str) -> None:
    """Skip ``count`` scalars or strings of one array."""
    if item_type in _SCALAR_SIZES:
        if count > reader.size:
            raise _Truncated
        reader.take(count * _SCALAR_SIZES[item_type])
    elif item_type == _STRING:
        if count > reader.size // 8:
            raise _Truncated
        for _ in range(count):
            reader.skip_string()
    else:
        raise _Malformed(f"unknown metadata array type {item_type} of key {_name(key)}")


def _skip_array(reader: _Reader, key: str) -> None:
    """Skip one array value, however its arrays nest, without recursion; arrays nested deeper
    than ``_MAX_ARRAY_DEPTH`` are malformed (llama.cpp reads no nested arrays at all)."""
    remaining: list[int] = []  # per open level of nesting: the arrays still to read there
    while True:
        item_type = reader.u32()
        count = reader.u64()
        if item_type == _ARRAY:
            if len(remaining) + 2 > _MAX_ARRAY_DEPTH:
                raise _Malformed(f"key {_name(key)} holds arrays nested more than {_MAX_ARRAY_DEPTH} deep")
            if count > reader.size // 12:
                raise _Truncated
            remaining.append(count)
        else:
            _skip_items(reader, item_type, count, key)
        while remaining and remaining[-1] == 0:
            remaining.pop()
        if not remaining:
            return
        remaining[-1] -= 1


def read_gguf_header(path: Path) -> GgufInfo:
    """Parse the header of ``path`` (which must start with the GGUF magic).

    Raises ``_Truncated`` / ``_Malformed`` (private); ``validate_gguf`` turns them into messages.
    """
    size = path.stat().st_size
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        reader = _Reader(buf, size)
        reader.take(4)  # magic
        version = reader.u32()
        tensor_count = reader.u64()
        kv_count = reader.u64()
        if tensor_count > _MAX_COUNT or kv_count > _MAX_COUNT:
            raise _Malformed(f"implausible counts ({tensor_count} tensors, {kv_count} keys)")
        metadata: dict[str, object] = {}
        for _ in range(kv_count):
            key = reader.string()
            vtype = reader.u32()
            value = _read_value(reader, vtype, key)
            if value is not None:
                metadata[key] = value
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise _Malformed(f"bad general.alignment {alignment!r}")
        data_end = 0
        for _ in range(tensor_count):
            reader.skip_string()  # tensor name
            n_dims = reader.u32()
            if not 1 <= n_dims <= _MAX_DIMS:
                raise _Malformed(f"tensor with {n_dims} dimensions")
            elements = 1
            for _ in range(n_dims):
                elements *= reader.u64()
            ggml_type = reader.u32()
            offset = reader.u64()
            if offset % alignment:
                raise _Malformed("tensor data offset is not aligned")
            nbytes = 0
            if ggml_type in GGML_TYPE_SIZES:
                block, type_size = GGML_TYPE_SIZES[ggml_type]
                nbytes = elements // block * type_size
            data_end = max(data_end, offset + nbytes)
        data_offset = -(-reader.pos // alignment) * alignment
    return GgufInfo(
        version=version,
        tensor_count=tensor_count,
        kv_count=kv_count,
        alignment=alignment,
        data_offset=data_offset,
        required_size=data_offset + data_end,
        file_size=size,
        metadata=metadata,
    )


def _describe_non_gguf(head: bytes) -> str:
    """A short phrase saying what a file that is not GGUF seems to be."""
    if head.startswith(b"PK\x03\x04"):
        return f"is a zip archive, not a GGUF file (magic {head[:4]!r})"
    if head.startswith(b"version https://git-lfs"):
        return "is a Git LFS pointer, not the model itself"
    if head.lstrip().lower().startswith((b"<!doctype", b"<html")):
        return "is an HTML page (a failed download?), not a GGUF file"
    if head.startswith(b"ggml") or head.startswith(b"ggjt") or head.startswith(b"ggmf"):
        return f"is an old GGML file (magic {head[:4]!r}), not GGUF; convert it to GGUF"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and all(ch.isprintable() or ch in "\r\n\t" for ch in text):
        return f"is a text file, not a GGUF file (starts with {head[:12]!r})"
    return f"is not a GGUF file (magic {head[:4]!r})"


def _read_head(p: Path, shown: str) -> tuple[int, bytes]:
    """The file's size and first 64 bytes; ``ModelError`` when it is missing, a folder, empty
    or unreadable."""
    broken = link_problem(p)
    if broken is not None:
        raise ModelError(f"{shown} {broken}; {FIX_HINT}")
    if not p.exists():
        raise ModelError(f"{shown} does not exist; {FIX_HINT}")
    if p.is_dir():
        raise ModelError(f"{shown} is a folder, not a .gguf file; {FIX_HINT}")
    try:
        size = p.stat().st_size
        if size == 0:
            raise ModelError(f"{shown} is empty (0 bytes); delete it and run `pcm models fetch`")
        with p.open("rb") as fh:
            return size, fh.read(64)
    except OSError as exc:
        raise ModelError(f"{shown} cannot be read ({exc.strerror or exc}); check its permissions") from None


def _check_head(head: bytes, size: int, shown: str) -> None:
    """``ModelError`` unless ``head`` starts a complete GGUF preamble of a supported version."""
    if not head.startswith(GGUF_MAGIC):
        if len(head) < 4 and GGUF_MAGIC.startswith(head):
            raise ModelError(f"{shown} is truncated ({size} bytes); delete it and run `pcm models fetch`")
        raise ModelError(f"{shown} {_describe_non_gguf(head)}; {FIX_HINT}")
    if len(head) < 24:
        raise ModelError(f"{shown} is truncated ({size} bytes, header incomplete); "
                         "delete it and run `pcm models fetch`")
    version = struct.unpack_from("<I", head, 4)[0]
    if version not in SUPPORTED_VERSIONS:
        if struct.unpack_from(">I", head, 4)[0] in SUPPORTED_VERSIONS:
            raise ModelError(f"{shown} is a big-endian GGUF file, which this build cannot load; {FIX_HINT}")
        raise ModelError(f"{shown} has unsupported GGUF version {version} (supported: 2, 3); {FIX_HINT}")


def _parse_header(p: Path, size: int, shown: str) -> GgufInfo:
    """The parsed header; ``ModelError`` when it is truncated or malformed."""
    try:
        return read_gguf_header(p)
    except _Truncated:
        raise ModelError(f"{shown} is truncated ({size} bytes; the header runs past the end); "
                         "delete it and run `pcm models fetch`") from None
    except _Malformed as exc:
        raise ModelError(f"{shown} has a malformed GGUF header ({exc}); {FIX_HINT}") from None
    except (OSError, ValueError, OverflowError, MemoryError) as exc:
        raise ModelError(f"{shown} could not be read as GGUF ({type(exc).__name__}); {FIX_HINT}") from None


def validate_gguf(path: str | os.PathLike[str]) -> GgufInfo:
    """Check ``path`` is a complete, supported GGUF file without loading it; return its header.

    Raises ``ModelError`` (one line naming the file and the fix) when the file is missing, empty,
    a folder, not GGUF (wrong magic: zip, text, HTML, LFS pointer, old GGML), an unsupported version,
    has a malformed header, or is shorter than the data its header declares (truncated).
    """
    p = Path(path)
    shown = display_path(p)
    size, head = _read_head(p, shown)
    _check_head(head, size, shown)
    info = _parse_header(p, size, shown)
    if info.tensor_count == 0:
        raise ModelError(f"{shown} declares no tensors, so it holds no model; {FIX_HINT}")
    if info.file_size < info.required_size:
        raise ModelError(
            f"{shown} is truncated ({info.file_size} of {info.required_size} bytes); "
            "delete it and run `pcm models fetch`"
        )
    return info


# The child process imports only llama_cpp: a crash there cannot take the app down.
_PROBE_SCRIPT = r"""
import ctypes, sys
path, decode = sys.argv[1], sys.argv[2] == "1"
def out(line):
    sys.stdout.write(" ".join(str(line).split())[:300] + "\n")
    sys.stdout.flush()
try:
    import llama_cpp
except Exception as exc:
    out("NOLLAMA " + repr(exc)); sys.exit(3)
tail = []
@llama_cpp.llama_log_callback
def _log(level, text, user_data):
    tail.append(text.decode("utf-8", "replace"))
llama_cpp.llama_log_set(_log, ctypes.c_void_p(0))
def reason(exc):
    lines = [l.strip() for l in "".join(tail).splitlines()
             if l.strip() and not l.lstrip().startswith(("print_info:", "llama_model_loader: - "))]
    for needle in ("error", "failed", "invalid", "unknown", "unsupported"):
        for line in reversed(lines):
            if needle in line.lower():
                return line
    return str(exc) or type(exc).__name__
try:
    llm = llama_cpp.Llama(model_path=path, n_ctx=128, n_batch=32, n_threads=1, verbose=False)
    if decode:
        llm.eval(llm.tokenize(b"Hello, world.", add_bos=True)[:8])
except Exception as exc:
    out("ERROR " + reason(exc)); sys.exit(2)
if decode:
    import math
    logits = llm._ctx.get_logits()
    bad = sum(1 for i in range(llm.n_vocab()) if not math.isfinite(logits[i]))
    if bad:
        out(f"NONFINITE {bad} of {llm.n_vocab()}"); sys.exit(4)
out("OK " + str(llm.n_vocab())); sys.exit(0)
"""


def check_templates(metadata: Mapping[str, object], shown: str) -> None:
    """Compile and render every chat template a header's ``metadata`` declares in the bounded
    worker process (``app.llm.template``); ``ModelError`` naming the file when one loops, recurses,
    runs out of memory, does not compile or is refused by the Jinja sandbox."""
    sources = template_sources(metadata)
    if not sources:
        return
    checker = ChatTemplates(sources, shown)
    try:
        checker.check()
    finally:
        checker.close()


def _last_line(text: str) -> str:
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def probe_gguf(path: str | os.PathLike[str], timeout_s: float = 60.0, *, decode: bool = True,
               templates: bool = True) -> None:
    """Load ``path`` with llama.cpp in a child process (and decode a few tokens when ``decode``).

    Runs ``validate_gguf`` first, then (with ``templates``) compiles and renders the file's chat
    templates in the bounded worker of ``app.llm.template`` (2 s each), because llama.cpp's
    Python binding compiles them while it loads. Raises ``ModelError`` (one line) when a template
    fails, when the child reports an error, crashes (e.g. a llama.cpp abort), gets non-finite
    logits from its decode (garbage weights: NaN), or does not finish within ``timeout_s`` seconds.
    """
    p = Path(path)
    info = validate_gguf(p)
    shown = display_path(p)
    if templates:
        check_templates(info.metadata, shown)
    try:
        proc = subprocess.run(
            python_command("-c", _PROBE_SCRIPT, os.path.abspath(p), "1" if decode else "0"),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
            **child_options(),
        )
    except subprocess.TimeoutExpired:
        raise ModelError(f"{shown} did not load within {timeout_s:g} s in a test process; "
                         "it may be too large for this machine — pick a smaller .gguf model") from None
    except OSError as exc:
        raise ModelError(f"could not start a process to test {shown} ({exc}); check the installation") from None
    stdout = _last_line(proc.stdout)
    if proc.returncode == 0 and stdout.startswith("OK"):
        return
    if stdout.startswith("NOLLAMA"):
        raise ModelError(f"cannot test {shown}: llama-cpp-python is not importable ({stdout[8:]}); "
                         "reinstall the app")
    if stdout.startswith("ERROR"):
        raise ModelError(f"llama.cpp cannot load {shown} ({stdout[6:]}); {FIX_HINT}")
    if stdout.startswith("NONFINITE"):
        raise ModelError(f"{shown} loads, but its weights give non-finite outputs ({stdout[10:]} logits are "
                         f"NaN or infinite): its tensor data is damaged; {FIX_HINT}")
    if proc.returncode < 0:
        try:
            why = signal.Signals(-proc.returncode).name
        except ValueError:
            why = f"signal {-proc.returncode}"
    else:
        why = f"exit code {proc.returncode}"
    detail = _last_line(proc.stderr)
    raise ModelError(
        f"llama.cpp crashed loading {shown} ({why}{': ' + detail if detail else ''}); "
        f"the file is damaged or unsupported — {FIX_HINT}"
    )
