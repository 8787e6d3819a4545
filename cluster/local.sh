#!/usr/bin/env bash
# A multi-node Ray cluster on one machine: a head and N workers, each its own raylet in its own
# session, to try the cluster path on a laptop (and to test it). Usage:
#   cluster/local.sh start [N_WORKERS=2] [CPUS_PER_WORKER=1]   # prints the address to use
#   cluster/local.sh kill-node I                               # SIGKILL worker node I (its raylet and workers)
#   cluster/local.sh nodes                                     # alive/dead per node of this cluster
#   cluster/local.sh stop                                      # stop this cluster only
# Then: RAY_AUTH_MODE=disabled RAY_ADDRESS=127.0.0.1:6390 ladder submit experiments/tiny.py --root /shared/path
# Every process must agree on RAY_AUTH_MODE (Ray 2.60 turns token auth on by default): this script
# uses disabled unless RAY_AUTH_MODE says otherwise. Environment: LADDER_RAY_PORT (6390),
# LADDER_RAY_TMP (/tmp/ladder-ray: keep it short, Ray's socket paths have a length limit), RAY (the
# ray executable), LADDER_RAY_DASHBOARD=1 (start the head with its dashboard on 127.0.0.1:PORT+2,
# which Ray Jobs needs; `start` then also prints its http:// address). Worker node I offers the custom
# resource worker_I, so a step can be pinned to one.
#
# Each node is started under setsid, and its session id is kept in $LADDER_RAY_TMP/nodes/: stop and
# kill-node signal those sessions only, never every Ray process of the machine (`ray stop` would
# also stop other users' clusters).
set -euo pipefail
cmd=${1:-start}
port=${LADDER_RAY_PORT:-6390}
tmp=${LADDER_RAY_TMP:-/tmp/ladder-ray}
nodes="$tmp/nodes"
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
export RAY_USAGE_STATS_ENABLED=0
# Ray starts workers at nice 15; a ladder's workers are its training, at the default priority (ladder.executor.ray_start).
export RAY_worker_niceness=${RAY_worker_niceness:-0}
ray=${RAY:-ray}
if ! command -v "$ray" >/dev/null 2>&1 && [ -x "$(dirname "$0")/../.venv/bin/ray" ]; then
  ray="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/ray"
fi

alive() {  # any process left in session $1
  ps -eo sid= | awk -v s="$1" '$1 == s {found=1} END {exit !found}'
}

child_sessions() {  # sessions of the direct children of session $1's processes that left it
  ps -eo pid=,ppid=,sid= | awk -v s="$1" '
    {ppid[$1] = $2; sid[$1] = $3}
    END {for (p in ppid) if (sid[p] != s && sid[ppid[p]] == s) print sid[p]}' | sort -u
}

kill_session() {  # SIGKILL every process of session $1 (the node's raylet, its agents and workers)
  local sid=$1 child
  # Ray Jobs starts each job's driver (and a watcher of it) in a new session; without this they
  # outlive a stop by up to a second, until the watcher notices its job supervisor is gone.
  for child in $(child_sessions "$sid"); do kill_session "$child"; done
  alive "$sid" || return 0
  pkill -KILL -s "$sid" 2>/dev/null || true
  for _ in $(seq 1 50); do alive "$sid" || return 0; sleep 0.1; done
  echo "local.sh: session $sid still has processes" >&2
}

start_node() {  # start_node NAME ARGS...: one `ray start` in a new session, recording the session id
  local name=$1
  shift
  # $$ of the setsid'd shell is the session id every process of this node inherits.
  # Each node's dashboard agent takes a free HTTP port: on Ray's fixed default (52365) only the first
  # agent of the machine binds (any other Ray there, or this cluster's other nodes), the rest run
  # without HTTP, and a head agent without it leaves `ray job submit` failing with "No available agent".
  setsid -w sh -c 'echo $$ > "$0"; exec "$@"' "$nodes/$name.sid" "$ray" start "$@" --dashboard-agent-listen-port=0 \
    </dev/null >"$nodes/$name.log" 2>&1 || {
    echo "local.sh: ray start of $name failed; see $nodes/$name.log" >&2
    tail -5 "$nodes/$name.log" >&2
    return 1
  }
}

case "$cmd" in
  start)
    workers=${2:-2}
    cpus=${3:-1}
    if [ -d "$nodes" ] && ls "$nodes"/*.sid >/dev/null 2>&1; then
      for f in "$nodes"/*.sid; do
        if alive "$(cat "$f")"; then
          echo "local.sh: a cluster from $tmp is running; run '$0 stop' first" >&2
          exit 1
        fi
      done
    fi
    rm -rf "$nodes"
    mkdir -p "$nodes"
    # The head schedules but trains nothing (0 CPUs), so every rung lands on a worker node. Its client
    # and dashboard ports follow the GCS port so two clusters on one machine do not collide.
    # The dashboard is off by default: it is a heavy process on a small machine and only Ray Jobs
    # (`ray job submit`) needs it. On, it listens on loopback only: it runs any job it is sent.
    dashboard=(--include-dashboard=false)
    if [ "${LADDER_RAY_DASHBOARD:-0}" != 0 ]; then
      dashboard=(--include-dashboard=true --dashboard-host=127.0.0.1)
    fi
    start_node head --head --port="$port" --num-cpus=0 --temp-dir="$tmp" "${dashboard[@]}" \
      --ray-client-server-port=$((port + 1)) --dashboard-port=$((port + 2)) --disable-usage-stats
    for i in $(seq 1 "$workers"); do
      start_node "worker_$i" --address="127.0.0.1:$port" --num-cpus="$cpus" --resources="{\"worker_$i\": 1}"
    done
    if [ "${LADDER_RAY_DASHBOARD:-0}" != 0 ]; then
      echo "http://127.0.0.1:$((port + 2))"
    fi
    # Last line: the GCS address, which callers read.
    echo "127.0.0.1:$port"
    ;;
  kill-node)
    i=${2:?usage: $0 kill-node I}
    f="$nodes/worker_$i.sid"
    [ -f "$f" ] || { echo "local.sh: no worker node $i in $tmp" >&2; exit 2; }
    kill_session "$(cat "$f")"
    ;;
  nodes)
    for f in "$nodes"/*.sid; do
      [ -f "$f" ] || continue
      n=$(basename "$f" .sid)
      if alive "$(cat "$f")"; then echo "$n alive"; else echo "$n dead"; fi
    done
    ;;
  stop)
    # Workers first, then the head; only sessions this script started.
    for f in "$nodes"/worker_*.sid "$nodes"/head.sid; do
      [ -f "$f" ] && kill_session "$(cat "$f")"
    done
    rm -rf "$nodes"
    ;;
  *)
    echo "usage: $0 start [N_WORKERS] [CPUS_PER_WORKER] | kill-node I | nodes | stop" >&2
    exit 2
    ;;
esac
