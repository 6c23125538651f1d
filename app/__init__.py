"""PCM Canvas: an offline desktop canvas for long, branching work with a local LLM."""

__version__ = "0.1.0"
