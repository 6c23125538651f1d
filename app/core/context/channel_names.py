"""The names of recall's channels, in the order the Evidence tab shows their ranks.

A leaf (no imports) so that the desktop's Evidence tab has them without loading recall's data
(``recall_model``: the ranking and gate models, numpy).
"""

CHANNELS = ("vector", "fulltext", "structured", "graph", "recent", "memory", "topic", "time")
#: Channels that query the index: observations of the outside, replayed as recorded.
INDEX_CHANNELS = ("vector", "fulltext", "memory", "topic")  # observed (recorded, fed back in replay)
