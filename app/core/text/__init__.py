"""Text helpers shared by every stage, pure and deterministic; nothing here knows about intents,
plans or routes.

- :mod:`app.core.text.words`: the tokenizers (``DEFAULT`` and its named variants, each
  splitting a text once however many stages ask), the light stemmer, stop words, content
  stems, the words inside a negated clause, order-keeping de-duplication of short strings;
- :mod:`app.core.text.sentences`: the sentence splitters (statements, compression's pieces, an
  input's sentence ends, a task result's and a summary's sentences) and the split of a compound
  question into its sub-questions;
- :mod:`app.core.text.quoting`: the one way outside text (files, feeds, API values, tool
  results, their labels) enters a prompt: ``fence``, with ``neutralise`` / ``quote_label``
  making the quotation unforgeable, and ``history_text`` keeping an answer that copied outside
  text from turning it into plain history;
- :mod:`app.core.text.names`: ``safe_text`` making a name that is not valid UTF-8 storable, and
  its lossless hex.
"""
