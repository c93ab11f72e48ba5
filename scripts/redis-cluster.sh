#!/usr/bin/env bash
# A local 3-master Redis Cluster from the Debian redis-server, on its own ports.
# Usage: scripts/redis-cluster.sh start|stop|status [first port, default 7101]
# Nodes listen on 127.0.0.1:<port>..<port+2>; data and logs live in .state/redis-cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

action=${1:-start}
first=${2:-7101}
ports=("$first" $((first + 1)) $((first + 2)))
root=.state/redis-cluster

running() { redis-cli -p "$1" ping >/dev/null 2>&1; }
healthy() { redis-cli -p "$first" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }
# A node whose directory is gone (the checkout that started it was deleted) exits at its next
# change of cluster configuration, as a slot's move is: such a cluster is started again.
rooted() {
  for port in "${ports[@]}"; do
    dir=$(redis-cli -p "$port" config get dir 2>/dev/null | sed -n 2p)
    [ -n "$dir" ] && [ -d "$dir" ] || return 1
  done
}

case "$action" in
  start)
    if ! command -v redis-server >/dev/null; then bash scripts/services.sh; fi
    if healthy && rooted; then echo "cluster already running on ports ${ports[*]}"; exit 0; fi
    for port in "${ports[@]}"; do
      if running "$port"; then redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; fi
      rm -rf "${root:?}/$port" && mkdir -p "$root/$port"
      redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 2000 --dir "$PWD/$root/$port" --save "" --appendonly no \
        --maxmemory-policy noeviction --daemonize yes --logfile "$PWD/$root/$port/redis.log"
    done
    for port in "${ports[@]}"; do
      for _ in $(seq 50); do running "$port" && break; sleep 0.1; done
    done
    redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
    for _ in $(seq 100); do healthy && break; sleep 0.1; done
    healthy || { echo "cluster did not reach state ok; see $root/*/redis.log" >&2; exit 1; }
    echo "cluster running on ports ${ports[*]}"
    ;;
  stop)
    # Only this cluster's own directories: the suite's and a bench's clusters may share .state.
    for port in "${ports[@]}"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "${root:?}/$port"; done
    echo "cluster stopped"
    ;;
  status)
    healthy && echo "ok" || { echo "not running"; exit 1; }
    ;;
  *)
    echo "usage: $0 start|stop|status [first port]" >&2; exit 2 ;;
esac
