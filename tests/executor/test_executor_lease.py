"""Storage primitives and leases: atomic writes, exclusive create, one winner per claim/takeover."""

from __future__ import annotations

import threading
import time

import pytest

from ladder.executor import Store
from ladder.executor.lease import RUNNING, SUCCESS, beat, read_state, try_claim, write_final


@pytest.fixture(params=["local", "memory"])
def store(request, tmp_path):
    if request.param == "local":
        return Store(str(tmp_path / "root"))
    return Store(f"memory://lease-test-{time.time_ns()}")


def test_atomic_write_and_exclusive_create(store):
    d = store.join(store.root, "l", "s-abc")
    p = store.join(d, "x.json")
    assert store.read_json(p) is None
    store.write_json(p, {"a": 1})
    store.write_json(p, {"a": 2})
    assert store.read_json(p) == {"a": 2}
    assert not [n for n in store.listdir(d) if n.startswith(".tmp")]  # no temp files left behind
    assert store.create_exclusive(store.join(d, "lock"), "one") is True
    assert store.create_exclusive(store.join(d, "lock"), "two") is False
    assert store.read_bytes(store.join(d, "lock")) == b"one"


def _race(store, d, n=8):
    state = read_state(store, d)
    barrier = threading.Barrier(n)
    wins = []

    def claim(i):
        barrier.wait()
        if try_claim(store, d, state, run_id=f"run-{i}", reason="test", owner=f"driver-{i}"):
            wins.append(i)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wins


def test_one_claim_wins_and_the_lease_is_live(store):
    d = store.join(store.root, "l", "s-abc")
    store.makedirs(d)
    wins = _race(store, d)
    assert len(wins) == 1
    st = read_state(store, d)
    assert st.state == RUNNING and st.run_id == f"run-{wins[0]}" and st.gen == 1
    assert st.live(timeout=5.0)
    # a late claimer working from an old view loses too
    assert not try_claim(store, d, read_state(store, d).__class__(None, 0, None), run_id="late", reason="x")


def test_stale_lease_is_taken_over_by_exactly_one(store):
    d = store.join(store.root, "l", "s-abc")
    store.makedirs(d)
    assert try_claim(store, d, read_state(store, d), run_id="dead", reason="new", owner="deadhost:1:x",
                     heartbeat=0.05)
    time.sleep(0.3)
    st = read_state(store, d)
    assert st.live(timeout=5.0)
    assert not st.live(timeout=0.2)  # heartbeat older than the timeout: stale
    wins = _race(store, d)
    assert len(wins) == 1
    st = read_state(store, d)
    assert st.gen == 2 and st.run_id == f"run-{wins[0]}" and st.lease["previous_owner"] == "deadhost:1:x"


def test_heartbeat_keeps_a_lease_live_and_stops_after_the_end(store):
    d = store.join(store.root, "l", "s-abc")
    store.makedirs(d)
    assert try_claim(store, d, read_state(store, d), run_id="r1", reason="new", heartbeat=0.05)
    time.sleep(0.3)
    assert not read_state(store, d).live(timeout=0.2)
    assert beat(store, d, "r1")
    assert read_state(store, d).live(timeout=0.2)
    assert write_final(store, d, "r1", SUCCESS)["status"] == SUCCESS
    assert not beat(store, d, "r1")  # never resurrects a finished step
    assert read_state(store, d).state == SUCCESS
    assert write_final(store, d, "someone-else", SUCCESS) is None  # only the owner commits


def test_a_lease_records_its_owners_heartbeat_and_readers_give_it_that_long(store):
    """A driver that beats every 30 s is alive 40 s after its last beat, even to a reader whose own
    timeout is 10 s: liveness allows MISSED_BEATS of the owner's recorded interval."""
    d = store.join(store.root, "l", "s-abc")
    store.makedirs(d)
    assert try_claim(store, d, read_state(store, d), run_id="slow", reason="new", heartbeat=30.0)
    st = read_state(store, d)
    assert st.status["heartbeat_interval"] == 30.0 and st.lease["heartbeat_interval"] == 30.0
    beat_at = float(st.status["heartbeat"])
    assert st.live(timeout=10.0, now=beat_at + 40.0)
    assert not st.live(timeout=10.0, now=beat_at + 91.0)  # three beats missed: stale


def test_a_store_without_exclusive_create_is_warned_about_once_and_one_that_cannot_write_is_refused(capfd):
    """Defect (issue 19): exclusive create fell back to exists-then-put without a word, so two drivers on
    such a store could both claim a step; a backend that cannot write at all crashed with a traceback.
    The backend here is fsspec's memory filesystem with exclusive create taken away, as e.g. WebDAV
    or HTTP backends have none."""
    import uuid

    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    from ladder.executor.store import ConfigError

    class NoExclusive(MemoryFileSystem):
        protocol = "noxb"
        store = {}
        pseudo_dirs = [""]
        writable = True

        def open(self, path, mode="rb", **kw):
            if "x" in mode:
                raise NotImplementedError("exclusive create")
            return super().open(path, mode, **kw)

        def pipe_file(self, path, value, **kw):
            if not self.writable:
                raise NotImplementedError("read-only backend")
            return super().pipe_file(path, value, **kw)

    fsspec.register_implementation("noxb", NoExclusive, clobber=True)
    store = Store(f"noxb://root-{uuid.uuid4().hex[:6]}")
    d = store.join(store.root, "l", "s")
    assert store.create_exclusive(store.join(d, ".lease-1"), b"a")
    assert not store.create_exclusive(store.join(d, ".lease-1"), b"b")
    assert store.create_exclusive(store.join(d, ".lease-2"), b"c")
    err = capfd.readouterr().err
    assert err.count("has no exclusive create") == 1 and "run one driver at a time" in err
    NoExclusive.writable = False
    with pytest.raises(ConfigError, match="can neither create a file exclusively nor write one"):
        store.create_exclusive(store.join(d, ".lease-3"), b"d")
