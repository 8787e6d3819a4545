"""The one error for unusable input and the exit codes of every command, shared by fits and the
`ladder` command line (ladder.cli.common), so bad input reads and exits the same everywhere.

Imports nothing, so the command line can catch it before pandas or JAX load.
"""

EXIT_OK = 0
EXIT_FAILED = 1  # a run failed, or the gate blocked the hero
EXIT_BAD_INPUT = 2  # one line naming the field or file and the fix; nothing written


class InputError(ValueError):
    """A user's input is unusable; the message is one line naming what and how to fix it."""
