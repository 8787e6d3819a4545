"""Defaults shared by the library and the `ladder` command line (no imports: cheap to read)."""

# The probability of every interval a user gets without asking for another: fits' bands and
# bootstrap intervals, and each `ladder` command's --level.
DEFAULT_LEVEL = 0.9

# How a task's backtest makes its forecast (fits.tasks_forecast): "weighted" weighs every method's prediction
# by 1 / its backtest error squared (fits.tasks_weighted); "best" takes the one method with the lowest error.
TASK_RULES = ("weighted", "best")
DEFAULT_TASK_RULE = TASK_RULES[0]
