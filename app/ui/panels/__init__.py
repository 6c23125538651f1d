"""Dockable panels: the inspector (turn, intent, plan, evidence, context, timing) and the streams."""
