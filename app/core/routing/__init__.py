"""Routing stage: anchor routing of inputs and routing of environment events."""
