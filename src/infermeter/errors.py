"""The one error type the CLI turns into a one-line message instead of a traceback."""


class UserError(Exception):
    """Bad input from the user: the message names what is wrong and how to fix it."""
