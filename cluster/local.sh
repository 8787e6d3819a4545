#!/usr/bin/env bash
# A multi-node Ray cluster on one machine: a head and N workers, each its own raylet, to try the
# cluster path on a laptop (and to test it). Usage:
#   cluster/local.sh start [N_WORKERS=2] [CPUS_PER_WORKER=1]   # prints the address to use
#   cluster/local.sh stop
# Then: RAY_ADDRESS=127.0.0.1:6390 ladder submit experiments/tiny.py --root /shared/path
# Every process must agree on RAY_AUTH_MODE (Ray 2.60 turns token auth on by default).
set -euo pipefail
cmd=${1:-start}
workers=${2:-2}
cpus=${3:-1}
port=${LADDER_RAY_PORT:-6390}
tmp=${LADDER_RAY_TMP:-/tmp/ladder-ray}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
export RAY_USAGE_STATS_ENABLED=0
ray=${RAY:-ray}

case "$cmd" in
  start)
    mkdir -p "$tmp"
    # The head schedules but trains nothing, so every rung lands on a worker node.
    "$ray" start --head --port="$port" --num-cpus=0 --temp-dir="$tmp" --include-dashboard=false --disable-usage-stats >/dev/null
    for i in $(seq 1 "$workers"); do
      "$ray" start --address="127.0.0.1:$port" --num-cpus="$cpus" --resources="{\"worker_$i\": 1}" >/dev/null
    done
    echo "127.0.0.1:$port"
    ;;
  stop)
    "$ray" stop --force >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: $0 start [N_WORKERS] [CPUS_PER_WORKER] | stop" >&2
    exit 2
    ;;
esac
