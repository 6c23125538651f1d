"""The set of configured sensors, started and stopped together with the app.

The composition root builds it from Settings with :meth:`SensorSet.build` (plain arguments: this
package never imports ``app.config``) and passes ``EnvIntake.put`` as the sink.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

from app.sensors.api import ApiSensor, baseline_from_events
from app.sensors.base import ApiSourceLike, FeedSourceLike, Sensor, Sink, SourceStatus
from app.sensors.feeds import FeedSensor, FirstPoll, seen_from_events
from app.sensors.files import FolderSensor

log = logging.getLogger(__name__)


class SensorSet:
    """Starts, stops and reports on a list of sensors; one failing to start does not stop the rest."""

    def __init__(self, sensors: Sequence[Sensor]) -> None:
        self.sensors: list[Sensor] = list(sensors)
        self._start_errors: dict[str, str] = {}

    @classmethod
    def build(
        cls,
        sink: Sink,
        *,
        folders: Iterable[str | os.PathLike[str]] = (),
        ignore_patterns: Sequence[str] = (),
        max_file_bytes: int = 1_000_000,
        feeds: Sequence[FeedSourceLike] = (),
        apis: Sequence[ApiSourceLike] = (),
        history: Iterable[Any] = (),
        feed_first_poll: FirstPoll = FirstPoll.EMIT,
        timeout_s: float = 10.0,
        max_feed_bytes: int = 2_000_000,
    ) -> SensorSet:
        """A set with a sensor for each configured kind (none for an empty list).

        ``history`` is the session's stored env events, oldest first: feeds skip the entries
        already stored, and API sources start from their last stored value."""
        sensors: list[Sensor] = []
        history = list(history) if (feeds or apis) else []
        folder_list = list(folders)
        if folder_list:
            sensors.append(FolderSensor(folder_list, sink, ignore_patterns=ignore_patterns, max_file_bytes=max_file_bytes))
        if feeds:
            sensors.append(FeedSensor(feeds, sink, max_bytes=max_feed_bytes, timeout_s=timeout_s, seen=seen_from_events(history), first_poll=feed_first_poll))
        if apis:
            sensors.append(ApiSensor(apis, sink, timeout_s=timeout_s, baseline=baseline_from_events(history)))
        return cls(sensors)

    def get(self, name: str) -> Sensor | None:
        """The sensor called ``name`` (files | feeds | api), if configured."""
        return next((s for s in self.sensors if s.name == name), None)

    def start(self) -> None:
        """Start every sensor; a failure is logged and shown in :meth:`status`."""
        for sensor in self.sensors:
            try:
                sensor.start()
            except Exception as exc:  # noqa: BLE001 - one broken sensor must not keep the others off
                log.exception("sensor %s failed to start", sensor.name)
                self._start_errors[sensor.name] = f"failed to start: {exc}"

    def stop(self, timeout_s: float = 3.0) -> None:
        """Stop every sensor (last started first) within ``timeout_s`` in total."""
        deadline = time.monotonic() + timeout_s
        for sensor in reversed(self.sensors):
            try:
                sensor.stop(max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - keep stopping the others
                log.exception("sensor %s failed to stop", sensor.name)

    def status(self) -> list[SourceStatus]:
        """Every source of every sensor, plus a record for each sensor that failed to start."""
        out: list[SourceStatus] = []
        for sensor in self.sensors:
            if sensor.name in self._start_errors:
                out.append(SourceStatus(sensor=sensor.name, source="", running=False, last_error=self._start_errors[sensor.name]))
            out.extend(sensor.status())
        return out
