"""W&B settings shared by the trainer's callback and the ladder-level run (ladder.wandb.log).

- Mode: ``disabled`` logs nothing; ``online``/``offline`` as named; ``auto`` (the default) is online
  when an API key is configured (WANDB_API_KEY or a netrc entry for the W&B host), else offline
  (upload later with ``wandb sync <root>/<ladder>/wandb/wandb/offline-run-*``). Precedence: the
  command line's ``--wandb``, then the spec's ``WandbSpec.mode`` unless auto, then WANDB_MODE.
- Files: everything W&B writes (runs, cache, config, data, artifacts) goes under
  ``<root>/<ladder>/wandb``, never the user's home; a variable the user set explicitly is respected.
- Run ids are derived from the ladder and step (and the step's output dir), so a resumed training
  step continues the same W&B run (``resume="allow"``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import netrc
import os
import threading
from pathlib import Path
from typing import Any

DEFAULT_PROJECT = "scaling-ladder"
_we_set: dict[str, str] = {}
_env_lock = threading.Lock()


def has_api_key() -> bool:
    """True when W&B credentials are configured: WANDB_API_KEY, or a netrc entry for the W&B host."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0].split(":")[0]
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        auth = netrc.netrc(path).authenticators(host)
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
    return bool(auth and auth[2])


def resolve_mode(cli_mode: str | None = None, spec_mode: str | None = None) -> str:
    """online | offline | disabled: the command line's --wandb, else the spec's mode unless it is
    auto, else WANDB_MODE, else auto (online with an API key, offline without)."""
    mode = cli_mode if cli_mode not in (None, "auto") else None
    mode = mode or (spec_mode if spec_mode not in (None, "auto") else None) or os.environ.get("WANDB_MODE") or "auto"
    mode = {"dryrun": "offline", "run": "online", "shared": "online"}.get(mode, mode)
    if mode == "auto":
        return "online" if has_api_key() else "offline"
    if mode not in ("online", "offline", "disabled"):
        raise ValueError(f"wandb mode {mode!r} is not one of auto, online, offline, disabled")
    return mode


def wandb_dir(root: str | Path, ladder: str) -> Path:
    return Path(root) / ladder / "wandb"


def configure_env(base: Path) -> Path:
    """Point W&B's directories under ``base`` (unless the user set them); returns ``base``."""
    base.mkdir(parents=True, exist_ok=True)
    targets = {"WANDB_DIR": base, "WANDB_CACHE_DIR": base / ".cache", "WANDB_CONFIG_DIR": base / ".config",
               "WANDB_DATA_DIR": base / ".data", "WANDB_ARTIFACT_DIR": base / ".artifacts"}
    with _env_lock:
        for var, path in targets.items():
            current = os.environ.get(var)
            if current is None or _we_set.get(var) == current:
                os.environ[var] = str(path)
                _we_set[var] = str(path)
    return base


def spec_config(spec: Any, run_name: str | None = None) -> dict:
    """The resolved spec as a plain dict for W&B's config (with the step's run spec under 'run')."""
    try:
        from ladder.spec import resolve

        resolved = resolve(spec)
    except Exception:
        resolved = spec
    cfg = _plain(dataclasses.asdict(resolved)) if dataclasses.is_dataclass(resolved) else _plain(resolved)
    if run_name and dataclasses.is_dataclass(resolved) and hasattr(resolved, "rung"):
        try:
            run = resolved.rung(run_name)
            cfg["run"] = _plain(dataclasses.asdict(run))
            cfg["run"]["params_active"] = run.model.params_active
            cfg["run"]["flops"] = run.flops
        except KeyError:
            pass
    return cfg


def run_id(ladder: str, name: str, salt: str = "") -> str:
    return hashlib.sha1(f"{ladder}/{name}/{salt}".encode()).hexdigest()[:16]


def _loggable(v: Any) -> bool:
    if isinstance(v, bool):
        return True
    if isinstance(v, int | float):
        return math.isfinite(float(v))
    return False


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, str | int | float | bool) or obj is None:
        return obj
    return str(obj)


def wandb_service_process():
    """This process's wandb-core (a Popen), or None. Private attributes of wandb 0.31: without them, None."""
    from wandb.sdk import wandb_setup

    connection = getattr(getattr(wandb_setup, "_singleton", None), "_connection", None)
    return getattr(getattr(connection, "_proc", None), "_process", None)


def teardown_bounded(wandb, seconds: float) -> bool:
    """``wandb.teardown()``, killing this process's wandb-core if it has not exited within ``seconds``.

    wandb.teardown() waits on wandb-core with no bound, and after a request to an unreachable server
    that process sometimes never exits (5 of 8 imports in a row hung there, wandb 0.31). Called where
    nothing is left to upload (an import; a run after ``run.finish()`` returned, which syncs it).
    Returns whether the process had to be killed. Without the private attributes it only waits.
    """
    service = wandb_service_process()
    raised: list[BaseException] = []

    def teardown() -> None:
        try:
            wandb.teardown()
        except SystemExit:  # wandb exits with the service's code: a killed service is not our error
            pass
        except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            raised.append(exc)

    worker = threading.Thread(target=teardown, name="ladder-wandb-teardown", daemon=True)
    worker.start()
    worker.join(seconds)
    killed = worker.is_alive() and service is not None
    if killed:
        service.kill()
        worker.join(seconds)
    if raised:
        raise raised[0]
    return killed
