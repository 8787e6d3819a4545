"""The ladder executor: content-hashed, resumable steps run as Ray tasks.

    from ladder.executor import Dep, Executor, Step, Blocked, expand_force

See step.py (Step, Dep, Blocked), runner.py (Executor), scheduler.py (one submit's loop), stop.py
(a stopping driver), fresh.py (forced reruns), stale.py (code changes), plan.py (the dry run),
lease.py (.status and leases), store.py (local or fsspec storage), provenance.py (step.json),
context.py (StepContext).
Importing this package does not import Ray; Ray starts only when a submit has something to run.
"""

from .context import StepContext
from .hashing import HASH_LEN, config_diff, step_hash
from .lease import BLOCKED, DEP_FAILED, FAILED, RUNNING, SUCCESS
from .plan import PlanEntry
from .runner import Executor, RunSummary, StepOutcome, expand_force
from .step import Blocked, Dep, Interrupted, Step
from .store import ConfigError, Store

__all__ = [
    "BLOCKED", "ConfigError", "DEP_FAILED", "FAILED", "HASH_LEN", "RUNNING", "SUCCESS", "Blocked", "Dep", "Executor", "Interrupted",
    "PlanEntry", "RunSummary", "Step", "StepContext", "StepOutcome", "Store", "config_diff", "expand_force",
    "step_hash",
]
