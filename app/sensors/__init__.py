"""Environment sensors (files, feeds, API polling) that turn changes into events.

Sensors run on their own threads and only call a sink (``EnvIntake.put``) with
:class:`~app.core.runtime.intake.RawChange` values; the intake coalesces and batches them on the
loop. Build the whole set from plain arguments with :meth:`SensorSet.build`, and give the intake
:func:`make_preparer` so file text is read once per coalesced event, off the loop.

Feeds are parsed without feedparser's HTML sanitizer (``app.sensors.feedparse``): it removes what hides an element (the
``visibility``/``opacity`` styles, ``aria-hidden``, ``<template>``, ``<style>`` rules) but keeps
the element's text, which would turn hidden content into ordinary text. Nothing here renders
HTML; :mod:`app.sensors.text` turns the page as written into its visible text, dropping scripts,
styles and hidden elements itself.
"""

from app.sensors.api import ApiSensor
from app.sensors.base import ApiSpec, FeedSpec, Sensor, Sink, SourceStatus
from app.sensors.feeds import FeedSensor, FirstPoll
from app.sensors.files import FilePreview, FolderSensor, make_preparer, prepare_file_change, read_text_preview
from app.sensors.sensorset import SensorSet

__all__ = [
    "ApiSensor", "ApiSpec", "FeedSensor", "FeedSpec", "FilePreview", "FirstPoll", "FolderSensor", "Sensor",
    "SensorSet", "Sink", "SourceStatus", "make_preparer", "prepare_file_change", "read_text_preview",
]
