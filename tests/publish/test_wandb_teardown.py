"""A wandb-core that never exits cannot hold a finished run's process: the real wandb library (offline),
its real service process frozen with SIGSTOP after the run finished, as a hung one would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from patience import HANG_S

SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    from pathlib import Path
    import wandb
    from ladder.wandb.env import configure_env, teardown_bounded, wandb_service_process

    base = configure_env(Path(sys.argv[1]))
    out = {}
    for case in ("healthy", "frozen"):
        run = wandb.init(project="teardown", name=case, dir=str(base), mode="offline",
                         settings=wandb.Settings(console="off", silent=True, x_disable_stats=True, save_code=False))
        run.log({"loss": 1.0})
        run.finish()
        service = wandb_service_process()
        if case == "frozen":
            os.kill(service.pid, signal.SIGSTOP)
        start = time.perf_counter()
        killed = teardown_bounded(wandb, 3.0)
        s = time.perf_counter() - start
        # Reaped by the teardown thread, which a loaded machine may not have run yet: wait, bounded by the
        # suite's hang guard (passed in).
        try:
            code = service.wait(timeout=float(sys.argv[2]))
        except Exception:  # still there after the hang guard: reported as not exited
            code = None
        out[case] = {"killed": killed, "s": s, "exit": code, "pid": service.pid}
    print(json.dumps(out))
""")


def test_a_frozen_wandb_service_is_killed_after_the_bound_and_a_healthy_one_exits_on_its_own(tmp_path):
    # WANDB_SERVICE left by a wandb run in this worker would make the child attach to that service, not own one
    env = {**{k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}, "WANDB_MODE": "offline",
           "HOME": str(tmp_path / "home")}
    # Unbounded, wandb.teardown() waits on the frozen service for ever: the timeout is the failure.
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "wandb"), str(HANG_S)], capture_output=True, text=True,
                          timeout=HANG_S, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    healthy, frozen = out["healthy"], out["frozen"]
    assert not healthy["killed"] and healthy["exit"] is not None and healthy["s"] < 3.0, out
    assert frozen["killed"] and frozen["exit"] == -9, out
    assert frozen["s"] >= 3.0, out
    assert not os.path.exists(f"/proc/{frozen['pid']}")
