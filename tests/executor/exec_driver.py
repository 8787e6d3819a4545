"""A ladder driver in its own process (its own local Ray), for the racing and SIGKILL tests.

    python exec_driver.py ROOT LOG SLEEP_JSON  -> prints the summary as JSON; exit 0 ok, 1 otherwise
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import exec_stepfns  # noqa: E402
import ray  # noqa: E402
from exec_ladders import ladder_steps  # noqa: E402

from ladder.executor import Executor  # noqa: E402


def main() -> int:
    root, log, sleep = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    ray.cloudpickle.register_pickle_by_value(exec_stepfns)
    ex = Executor(root, "lad")  # lease timeout / heartbeat from LADDER_LEASE_TIMEOUT / LADDER_HEARTBEAT
    s = ex.run(ladder_steps(gate_pass=True), runtime={"log": log, "sleep": sleep})
    print(json.dumps({"ok": s.ok, "statuses": s.statuses, "actions": {n: o.action for n, o in s.steps.items()},
                      "reasons": {n: o.reason for n, o in s.steps.items()}}), flush=True)
    return 0 if s.ok else 1


if __name__ == "__main__":
    sys.exit(main())
