"""The prompt's sections, one module each: the lines a section contributes, bound to evidence.

``profile`` (the user's prohibitions, permissions, preferences), ``goal`` (the current goal and
its acceptance), ``history`` (the branch so far: the raw window and the summary lines before it),
``evidence`` (the recalled items), ``tools`` (the turn's tool results), ``tasks`` (the task stack
or the running tasks an interruption is about), ``gate_notes`` (what the relevance gate found
missing) and ``conflicts`` (facts stated differently). Each takes the session state and plain
data (a section that needs a type of a higher stage, a task stack or a tool round, is given what
it shows of it); ``app.core.context.prompt`` puts them together.
"""
