"""The one exception type the CLI turns into a one-line message and exit code 1."""

from __future__ import annotations


class RooflineError(Exception):
    """A domain or validation error: bad input, unknown card or model, malformed file.

    ``field`` names the API argument at fault (``batch``, ``prompt_tokens`` ...) when there is
    one: the library's message speaks of that argument, and the CLI shows the flag instead
    (``cli.FLAGS`` maps one to the other)."""

    def __init__(self, message: str, field: str | None = None):
        message = _one_line(str(message))
        super().__init__(message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def for_flag(self, flag: str | None) -> str:
        """The message with ``flag`` (e.g. ``--batch``) in place of the argument's name."""
        if self.field is None or flag is None:
            return str(self)
        return f"{flag}: {self.message}"


class RooflineWarning(UserWarning):
    """Something the answer rests on that the user should know (a mismatch, an extrapolation)."""


def _one_line(text: str) -> str:
    """Control characters (a newline in a key of a hostile file, an escape sequence in a name)
    shown escaped: an error is one line of plain text, whatever the input held."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
