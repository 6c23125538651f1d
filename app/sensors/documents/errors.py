"""The one error a document reader raises: the file is refused, and ``str()`` says why in one line."""


class DocumentRefused(Exception):
    """A document that cannot be read (encrypted, no text layer, too many pages, a zip bomb, not
    the format its name says); the message names the file."""
