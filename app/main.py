"""Composition root (filled below)."""
