"""What a read through W&B's public API (`wandb.Api`) needs around it: W&B's own folders in a scratch
folder, and telling a server that did not answer (retry later) from one that said no (bad input).

Used by the importers (ladder.imports) and by `ladder follow`'s W&B source, which polls the same API.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus

# How long each API request may take: wandb-core retries a refused connection until then.
DEFAULT_TIMEOUT_S = 30.0
# wandb.teardown() waits on its wandb-core process with no bound, and after a request to an unreachable
# server that process sometimes never exits (wandb 0.31). A read has nothing to upload, so past this the
# process is killed (ladder.wandb.env.teardown_bounded).
TEARDOWN_S = 5.0
# Statuses that are the network's or the server's passing state, not an answer about the request.
_PASSING = {HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS, HTTPStatus.BAD_GATEWAY,
            HTTPStatus.SERVICE_UNAVAILABLE, HTTPStatus.GATEWAY_TIMEOUT}


@contextmanager
def scratch_dirs() -> Iterator[str]:
    """W&B's folders (those the user did not set) in a temporary folder for the length of the read."""
    keys = ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR")
    with tempfile.TemporaryDirectory(prefix="ladder-wandb-") as tmp:
        unset = [k for k in keys if k not in os.environ]
        for k in unset:
            os.environ[k] = os.path.join(tmp, k.lower())
        try:
            yield tmp
        finally:
            for k in unset:
                os.environ.pop(k, None)


def unreachable(exc: BaseException) -> bool:
    """Whether W&B's API failed without the server's answer: no response (refused, timed out, no
    network) or a passing status. A 401 or 404 is an answer: the key or the run is wrong.

    wandb 0.31 sends the public API's requests through wandb-core, whose failures come as
    WandbApiFailedError (an ApiErrorResponse, or none when no HTTP response came), often wrapped in
    another error (AuthenticationError when the key check could not reach the server).
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__name__ == "WandbApiFailedError":
            response = getattr(cur, "response", None)
            status = getattr(response, "http_status", 0) if response is not None else 0
            return not status or status in _PASSING
        if isinstance(cur, TimeoutError | ConnectionError):
            return True
        if type(cur).__module__.startswith("requests") and type(cur).__name__ in ("ConnectionError", "Timeout",
                                                                                  "ConnectTimeout", "ReadTimeout"):
            return True
        cur = cur.__cause__ or cur.__context__
    return False
