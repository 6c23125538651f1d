"""Replay datasets, baselines, metrics and reports."""
