"""The API sensor: a JSON endpoint polled on an interval → a change only when the watched value does.

Each source is fetched with the same capped, conditional fetch as feeds; ``path`` picks the value
(dotted, list indices allowed: ``items.0.price``; empty: the whole document). Values are compared
by their canonical JSON (sorted keys), so a reordered object is not a change. The document is
parsed strictly (``parse_json``): NaN, Infinity, numbers that overflow, integers outside 64 bits,
lone surrogates and nesting too deep for the parser are reported as "not JSON", in one line, so
every value the session keeps can be exported as strict JSON; a value nested deeper than 32
levels is kept in the payload as its JSON text.

First poll (decided here): with no ``baseline`` for the source, the first successful poll records
the value and sends one ``initial`` change carrying it — the session learns the current value and
that the sensor works. With a baseline (the last value stored in the session's events, see
``baseline_from_events``), the first poll is compared to it like any other, so a restart does
not re-announce an unchanged value.
``emit_initial=False`` records the first value silently.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.core.errors import CoreError
from app.core.runtime.intake import RawChange
from app.sensors.base import ApiSourceLike, Sink, StatusBoard
from app.sensors.fetch import FetchError, PolledSensor, PollingThreads, Validators, fetch_bytes

_MAX_SHOWN = 2_000  # characters of a value shown in an event's text
_MAX_PAYLOAD = 20_000  # characters of canonical JSON kept in the payload as a value


class PathError(CoreError, LookupError):
    """The dotted path does not exist in the document."""


def pick(document: Any, path: str) -> Any:
    """The value at dotted ``path`` (``items.0.price``); raises :class:`PathError`."""
    value = document
    if not path:
        return value
    for part in path.split("."):
        if isinstance(value, list):
            try:
                value = value[int(part)]
            except (ValueError, IndexError):
                raise PathError(f"no item {part!r} in a list of {len(value)} at {path!r}") from None
        elif isinstance(value, dict):
            if part not in value:
                raise PathError(f"no key {part!r} at {path!r}")
            value = value[part]
        else:
            raise PathError(f"{part!r} of a {type(value).__name__} at {path!r}")
    return value


_MAX_DEPTH = 32  # nesting kept as a value in the payload; deeper values are kept as text
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is out of range for a number")
    return value


def parse_json(body: bytes) -> Any:
    """The JSON document in ``body``, strictly: ``ValueError`` (one line) for what is not JSON
    (NaN, Infinity, a number that overflows, bad UTF-8, nesting too deep for the parser) or what
    the session cannot keep (a lone surrogate, an integer outside 64 bits)."""
    try:
        value = json.loads(body.decode("utf-8-sig"), parse_constant=_refuse_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    stack = [value]
    while stack:  # without recursion: the document may be deep
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("a string holds a lone surrogate") from None
        elif isinstance(item, int) and not isinstance(item, bool) and not _INT64[0] <= item <= _INT64[1]:
            raise ValueError("an integer does not fit in 64 bits")
    return value


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def canonical(value: Any) -> str:
    """Canonical JSON of a value: sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _payload_value(value: Any, text: str) -> Any:
    """The value as the payload keeps it: itself, or its (cut) JSON text when it is long or
    nested deeper than ``_MAX_DEPTH`` (an export refuses deeper documents)."""
    if len(text) <= _MAX_PAYLOAD and _depth(value) <= _MAX_DEPTH:
        return value
    return {"truncated_json": text[:_MAX_PAYLOAD]}


def _shown(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


class _ApiState:
    def __init__(self) -> None:
        self.validators: Validators | None = None
        self.value: Any = None
        self.text: str | None = None  # canonical JSON of the last value; None before the first


def source_key(source: ApiSourceLike) -> str:
    """How a source is named in keys and status: ``url`` or ``url#path``."""
    return f"{source.url}#{source.path}" if source.path else source.url


def baseline_from_events(events: Iterable[Any]) -> dict[str, Any]:
    """The last value stored per source, from the session's ``api`` env events (oldest first),
    so a restart compares its first poll with it instead of announcing an "initial" value again.
    A value that was stored truncated is left out (it cannot be compared)."""
    baseline: dict[str, Any] = {}
    for event in events:
        payload = getattr(event, "payload", None) or {}
        if getattr(event, "kind", "") != "api" or "new" not in payload or not payload.get("url"):
            continue
        value = payload["new"]
        key = f"{payload['url']}#{payload['path']}" if payload.get("path") else str(payload["url"])
        if isinstance(value, dict) and set(value) == {"truncated_json"}:
            baseline.pop(key, None)
        else:
            baseline[key] = value
    return baseline


class ApiSensor(PolledSensor):
    """Polls each endpoint on its interval; ``sink`` gets a change when the value changes."""

    name = "api"

    def __init__(
        self,
        sources: Sequence[ApiSourceLike],
        sink: Sink,
        *,
        max_bytes: int = 1_000_000,
        timeout_s: float = 10.0,
        baseline: Mapping[str, Any] | None = None,
        emit_initial: bool = True,
    ) -> None:
        unique: dict[str, ApiSourceLike] = {}
        for s in sources:
            unique.setdefault(source_key(s), s)
        self.sources: list[ApiSourceLike] = list(unique.values())
        self._sink = sink
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s
        self._emit_initial = emit_initial
        self._state = [_ApiState() for _ in self.sources]
        for source, state in zip(self.sources, self._state):
            if baseline and source_key(source) in baseline:
                state.value = baseline[source_key(source)]
                state.text = canonical(state.value)
        self._locks = [threading.Lock() for _ in self.sources]
        self._board = StatusBoard(self.name, [source_key(s) for s in self.sources])
        self._threads = PollingThreads(self.name, [s.interval_s for s in self.sources])

    def values(self) -> dict[str, Any]:
        """The last value per source key (what the engine may persist as the next baseline)."""
        return {source_key(s): st.value for s, st in zip(self.sources, self._state) if st.text is not None}

    def poll_once(self, index: int) -> bool:
        """Poll endpoint ``index`` now (blocking); returns True when a change was sent."""
        with self._locks[index]:
            return self._poll(index)

    def _poll(self, index: int) -> bool:
        source, state = self.sources[index], self._state[index]
        name = source_key(source)
        self._board.add(name, "polls")
        try:
            result = fetch_bytes(source.url, max_bytes=self._max_bytes, timeout_s=self._timeout_s, validators=state.validators)
        except FetchError as exc:
            self._report(source, exc.reason, str(exc))
            return False
        if result.not_modified:
            self._board.add(name, "not_modified")
            self._board.ok(name)
            return False
        try:
            value = pick(parse_json(result.body or b""), source.path)
        except ValueError as exc:
            self._report(source, "malformed", f"not JSON: {exc}")
            return False
        except PathError as exc:
            self._report(source, "path", str(exc))
            return False
        state.validators = result.validators
        text = canonical(value)
        self._board.ok(name)
        self._board.set_detail(name, value=_shown(text))
        old_text, old_value = state.text, state.value
        state.value, state.text = value, text
        if old_text == text:
            return False
        if old_text is None and not self._emit_initial:
            return False
        label = source.path or source.url
        if old_text is None:
            change, title, content = "initial", f"{label}: initial value", f"{label} = {_shown(text)}"
            payload: dict[str, Any] = {"new": _payload_value(value, text)}
        else:
            assert old_text is not None
            change, title = "changed", f"{label} changed"
            content = f"{label}: {_shown(old_text)} → {_shown(text)}"
            payload = {"old": _payload_value(old_value, old_text), "new": _payload_value(value, text)}
        payload.update(url=source.url, path=source.path)
        self._sink(RawChange(
            key=f"api:{name}", kind="api", source=source.url, uri=source.url, change=change,
            title=title, content=content, payload=payload,
        ))
        self._board.add(name, "changes")
        return True

    def _report(self, source: ApiSourceLike, reason: str, message: str) -> None:
        name = source_key(source)
        if self._board.error(name, message):
            self._sink(RawChange(
                key=f"api:{name}#error", kind="api", source=source.url, uri=source.url, change="error",
                title=f"API error: {source.path or source.url}", content=message,
                payload={"error": reason, "message": message, "url": source.url, "path": source.path},
            ))
