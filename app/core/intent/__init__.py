"""Intent stage: the intent model, cues, signals, the LLM signal's normalisation, the user profile."""
