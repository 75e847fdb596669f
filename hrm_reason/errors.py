"""The one exception type that reaches users as a single line (the CLI prints it and exits non-zero)."""


class UserError(Exception):
    """Bad input from the user: a flag, a config field, a file. The message names it and says what was expected."""
