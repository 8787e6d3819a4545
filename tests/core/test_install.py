"""The base install, as a user of the fits gets it: build the wheel, install it in a fresh venv
(no system site-packages, no extras), and run `ladder fit` / `ladder predict` there on the
Chinchilla reference table that ships inside the wheel. Nothing of the training stack may come
along, and a training command must say in one line what to install.

pip resolves numpy, scipy, pandas, click and threadpoolctl from the machine's package index (and its cache), as
`pip install .` would; the wheel is built from a copy of the sources so the checkout gains no
build/ folder. About 15 s here (wheel 5 s, venv + install 5 s, commands 5 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
TRAIN_STACK = ("jax", "ray", "wandb", "flax", "optax", "orbax", "plotly", "matplotlib", "pyarrow", "fsspec", "rich")


def _run(cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=HANG_S, **kw)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    for pkg in ("ladder", "fits"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(out)])
    (whl,) = out.glob("scaling_ladder-*.whl")
    return whl


def test_the_wheel_carries_the_reference_data_license_and_type_markers(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = REPO / "fits" / "reference_data"
    shipped = {str(p.relative_to(REPO)) for p in data.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert shipped and shipped <= names, sorted(shipped - names)[:5]
    assert {"fits/py.typed", "ladder/py.typed", "ladder/dashboard/static/index.html"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert sorted(r.split()[1].split(">")[0].split("<")[0] for r in requires) == ["click", "numpy", "pandas", "scipy", "threadpoolctl"]
    assert "License-Expression: Apache-2.0" in meta and "Provides-Extra: train" in meta


@pytest.mark.slow
def test_a_fresh_venv_without_extras_fits_and_predicts_the_chinchilla_table(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    # the outer pip installs into the venv (--python): no pip bootstrap in the venv; --no-compile skips .pyc
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-compile", wheel])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LADDER_REFERENCE_DATA")}
    probe = _run([py, "-c", "import importlib.util, json, sys; "
                  f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {TRAIN_STACK!r}}}))"],
                 cwd=tmp_path, env=env)
    present = [m for m, found in json.loads(probe.stdout).items() if found]
    assert present == [], f"the base install pulled in {present}"
    runs = tmp_path / "runs.csv"
    _run([py, "-c", f"from fits import reference; reference.chinchilla_epoch().to_csv({str(runs)!r}, index=False)"],
         cwd=tmp_path, env=env)
    ladder = venv / "bin" / "ladder"
    fit = _run([ladder, "fit", runs, "--json", "--out", tmp_path / "fit.json"], cwd=tmp_path, env=env)
    d = json.loads(fit.stdout)
    assert d["law"] == "chinchilla" and d["n_points"] == 240
    assert d["params"]["alpha"] == pytest.approx(0.3478, abs=0.003)  # Epoch's replication: alpha 0.3478
    pred = _run([ladder, "predict", tmp_path / "fit.json", "--params", "7e10", "--tokens", "1.4e12", "--json"],
                cwd=tmp_path, env=env)
    p = json.loads(pred.stdout)["predictions"][0]
    assert 1.8 < p["loss"] < 2.1  # Chinchilla-70B's loss on Epoch's fit is about 1.94
    # a command of the training stack says in one line what to install, exit 2, no traceback
    plan = subprocess.run([ladder, "plan", REPO / "experiments" / "smoke.py"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=HANG_S)
    lines = plan.stderr.strip().splitlines()
    assert plan.returncode == 2 and len(lines) == 1, plan.stderr
    assert "pip install 'scaling-ladder[train]'" in lines[0] and "Traceback" not in plan.stderr


@pytest.mark.parametrize("name", ["gpu.yaml", "tpu.yaml"])
def test_cluster_images_install_into_a_python_that_satisfies_requires_python(name):
    """Ubuntu 22.04's python3 is 3.10; the configs must install (and run Ray from) a Python >= 3.11."""
    import re
    import tomllib

    import yaml

    floor = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    need = tuple(int(x) for x in re.fullmatch(r">=\s*(\d+)\.(\d+)", floor).groups())
    setup = yaml.safe_load((REPO / "cluster" / name).read_text())["setup_commands"]
    venvs = [re.search(r"python(\d+)\.(\d+) -m venv (\S+)", c) for c in setup]
    venv = next(m for m in venvs if m)
    assert tuple(int(x) for x in venv.groups()[:2]) >= need
    installs = [c for c in setup if "pip install -e" in c]
    assert installs and all(f"{venv.group(3)}/bin/python -m pip" in c for c in installs)
    assert any(f"{venv.group(3).replace('~', '$HOME')}/bin:$PATH" in c for c in setup), "Ray must start from the venv"


def test_torch_comes_with_the_development_install_not_with_train():
    """examples/torch_gpt and its tests need torch: `make install` brings a CPU build through the `torch` extra,
    while `[train]` (and `[gpu]`, `[tpu]`, which extend it) never pulls torch's GBs into a user's install."""
    import re
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {extra: {re.split(r"[<>=\[ ;]", req)[0] for req in reqs} for extra, reqs in extras.items()}
    assert names["torch"] == {"torch"}
    assert all("torch" not in names[e] for e in ("train", "gpu", "tpu", "dev")), names
    install = (REPO / "Makefile").read_text().split("$(STAMP): pyproject.toml")[1].split("\n\n")[0]
    assert "--torch-backend cpu -e '.[torch]'" in install and "pip install -q -e '.[torch]'" in install
