"""Defaults shared by the library and the `ladder` command line (no imports: cheap to read)."""

# The probability of every interval a user gets without asking for another: fits' bands and
# bootstrap intervals, and each `ladder` command's --level.
DEFAULT_LEVEL = 0.9
