"""Environment sensors (files, feeds, API polling) that turn changes into events."""
