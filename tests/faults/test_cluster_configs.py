"""The cluster configs a user starts: both `ray up` YAMLs pass Ray's own schema (with Ray's defaults
filled in, offline), every Ray process and driver they start agrees on RAY_AUTH_MODE, the head trains
nothing, and cluster/local.sh is valid bash with the commands its README names."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from conftest import REPO

CLUSTER = REPO / "cluster"


@pytest.mark.parametrize("name", ["gpu.yaml", "tpu.yaml"])
def test_ray_up_config_is_valid_and_consistent(name):
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((CLUSTER / name).read_text())
    validate_config(prepare_config(dict(config)))
    starts = config["head_start_ray_commands"] + config["worker_start_ray_commands"]
    assert all("RAY_AUTH_MODE=disabled" in c for c in starts if c.strip().startswith(("RAY_", "ray start")))
    assert any("export RAY_AUTH_MODE=disabled" in c for c in config["setup_commands"]), "drivers need it too"
    head = config["head_start_ray_commands"][-1]
    head_res = config["available_node_types"][config["head_node_type"]]["resources"]
    assert "--num-cpus=0" in head or head_res.get("CPU") == 0, "the head must not take rungs"
    assert any("pip install -e" in c and ("[gpu]" in c or "[tpu]" in c) for c in config["setup_commands"])


def test_local_sh_is_valid_bash_and_documented():
    script = CLUSTER / "local.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    usage = subprocess.run([str(script), "frobnicate"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    readme = (CLUSTER / "README.md").read_text()
    for cmd in ("cluster/local.sh start", "cluster/local.sh kill-node", "cluster/local.sh stop"):
        assert cmd in readme, cmd
