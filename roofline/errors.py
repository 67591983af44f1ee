"""The one exception type the CLI turns into a one-line message and exit code 1."""


class RooflineError(Exception):
    """A domain or validation error: bad input, unknown card or model, malformed file."""
