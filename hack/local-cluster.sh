#!/usr/bin/env bash
# Runs a local multi-node narad cluster on one machine, for trying things out by hand.
#
# Usage (from anywhere in the repo):
#   hack/local-cluster.sh start [N]   build bin/narad if it is missing or older than the sources,
#                                     then start nodes n1…nN (default 3) and print their URLs
#   hack/local-cluster.sh status      per node: pid, readiness; then the members list
#   hack/local-cluster.sh stop        SIGTERM every node (SIGKILL after 15 s); data is kept
#   hack/local-cluster.sh clean       stop, then delete ./.narad/cluster
#   hack/local-cluster.sh settle TOPIC [SECONDS]
#                                     wait (default 60 s) until every partition of TOPIC is led by
#                                     its preferred leader, the first of its replicas: a replicated
#                                     topic created right after the nodes start is led by one node
#                                     at first, for ten seconds or so (benchmarks wait for this)
#
# Layout: node nI listens on its own loopback host 127.0.0.(I+1) — HTTP API on port 7942,
# node RPC/Raft on 7943 — so n1 is http://127.0.0.2:7942, n2 http://127.0.0.3:7942, …
# (Linux routes all of 127.0.0.0/8; on macOS add aliases first: sudo ifconfig lo0 alias 127.0.0.3 …).
# Everything lives under ./.narad/cluster: nI/data (data dir), nI/narad.log, nI/pid, and
# secret (the generated cluster secret, reused on every start).
#
# n1 starts with --bootstrap (a no-op once its data dir holds a cluster); every other node starts
# with --join listing the cluster addresses of all the other nodes, so `start` after `stop`
# restarts the same cluster, and `start 5` on a running 3-node cluster adds n4 and n5 (the
# first three nodes are Raft voters, later ones join as non-voters). Nodes are started one at a
# time, each waiting for /readyz before the next. Security is off (no credentials needed).
#
# Environment:
#   NARAD_LOCAL_HTTP_PORT (7942), NARAD_LOCAL_CLUSTER_PORT (7943)  ports on every node's host
#   NARAD_LOCAL_ARGS      extra `narad serve` flags for every node, e.g. "--log-level debug"
#   NARAD_LOCAL_PPROF_PORT  serve pprof on every node's host at this port (--pprof-addr)
#   NARAD_BIN             use this binary instead of building bin/narad
#
# Try it:  hack/local-cluster.sh start 3
#          curl -s -XPOST http://127.0.0.2:7942/v1/topics -d '{"name":"demo"}'
#          curl -s -XPOST http://127.0.0.3:7942/v1/topics/demo/produce -d hello
#          curl -s 'http://127.0.0.4:7942/v1/topics/demo/consume?wait=2s'
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
base="$root/.narad/cluster"
http_port="${NARAD_LOCAL_HTTP_PORT:-7942}"
cluster_port="${NARAD_LOCAL_CLUSTER_PORT:-7943}"
narad="${NARAD_BIN:-$root/bin/narad}"

host() { echo "127.0.0.$(($1 + 1))"; }
http_addr() { echo "$(host "$1"):$http_port"; }
cluster_addr() { echo "$(host "$1"):$cluster_port"; }

# pid_of I prints node I's pid if that process is alive.
pid_of() {
  local f="$base/n$1/pid" pid
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

# known_nodes prints the indexes of node directories that exist, in order.
known_nodes() {
  local d
  for d in "$base"/n*; do
    [ -d "$d" ] || continue
    echo "${d##*/n}"
  done | sort -n
}

build_if_needed() {
  if [ -n "${NARAD_BIN:-}" ]; then
    [ -x "$narad" ] || { echo "NARAD_BIN=$narad is not executable" >&2; exit 1; }
    return
  fi
  if [ ! -x "$narad" ] || [ -n "$(find "$root/broker" -name '*.go' -newer "$narad" -print -quit)" ]; then
    echo "building $narad …"
    make -C "$root" build >/dev/null
  fi
}

wait_ready() {
  local i="$1" url
  url="http://$(http_addr "$i")/readyz"
  for _ in $(seq 1 300); do
    if curl -fsS -m 1 "$url" >/dev/null 2>&1; then
      return 0
    fi
    if ! pid_of "$i" >/dev/null; then
      echo "n$i exited before it was ready; last log lines:" >&2
      tail -n 20 "$base/n$i/narad.log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
  echo "n$i not ready after 60 s; see $base/n$i/narad.log" >&2
  return 1
}

start_node() {
  local i="$1" n="$2" dir="$base/n$1" peers="" j
  mkdir -p "$dir"
  local -a args=(serve --node-id "n$i" --data-dir "$dir/data" --http-addr "$(http_addr "$i")"
    --cluster-addr "$(cluster_addr "$i")" --security-enabled=false --log-format text)
  if [ "$i" -eq 1 ]; then
    args+=(--bootstrap)
  else
    for j in $(seq 1 "$n"); do
      [ "$j" -eq "$i" ] && continue
      peers="${peers:+$peers,}$(cluster_addr "$j")"
    done
    args+=(--join "$peers")
  fi
  # shellcheck disable=SC2206 # NARAD_LOCAL_ARGS is split on purpose
  args+=(${NARAD_LOCAL_ARGS:-})
  [ -n "${NARAD_LOCAL_PPROF_PORT:-}" ] && args+=(--pprof-addr "$(host "$i"):$NARAD_LOCAL_PPROF_PORT")
  NARAD_CLUSTER_SECRET="$(cat "$base/secret")" nohup "$narad" "${args[@]}" >>"$dir/narad.log" 2>&1 &
  echo $! >"$dir/pid"
  wait_ready "$i"
}

cmd_start() {
  local n="${1:-3}" i highest=0
  [[ "$n" =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 253 ] || { echo "N must be 1-253" >&2; exit 2; }
  build_if_needed
  mkdir -p "$base"
  if [ ! -s "$base/secret" ]; then
    (umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$base/secret")
  fi
  for i in $(known_nodes); do highest="$i"; done
  [ "$highest" -gt "$n" ] && n="$highest" # never leave existing nodes out of the join lists
  for i in $(seq 1 "$n"); do
    if pid="$(pid_of "$i")"; then
      echo "n$i already running (pid $pid)"
      continue
    fi
    start_node "$i" "$n"
    echo "n$i ready (pid $(cat "$base/n$i/pid"))"
  done
  echo
  for i in $(seq 1 "$n"); do
    echo "n$i  http://$(http_addr "$i")  (cluster $(cluster_addr "$i"), log $base/n$i/narad.log)"
  done
}

cmd_stop() {
  local i pid stopped=0
  for i in $(known_nodes); do
    pid="$(pid_of "$i")" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 75); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "n$i (pid $pid) ignored SIGTERM for 15 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$base/n$i/pid"
    echo "n$i stopped"
    stopped=$((stopped + 1))
  done
  [ "$stopped" -gt 0 ] || echo "no node running"
}

cmd_status() {
  local i pid ready first=""
  for i in $(known_nodes); do
    if pid="$(pid_of "$i")"; then
      ready="$(curl -sS -m 2 "http://$(http_addr "$i")/readyz" 2>/dev/null || echo unreachable)"
      echo "n$i  pid $pid  http://$(http_addr "$i")  readyz: $ready"
      [ -n "$first" ] || first="$i"
    else
      echo "n$i  not running"
    fi
  done
  if [ -z "$first" ]; then
    echo "no node running"
    return 0
  fi
  echo
  echo "members (as n$first sees them):"
  local body
  body="$(curl -sS -m 5 "http://$(http_addr "$first")/v1/cluster/members")" || return 1
  if command -v python3 >/dev/null; then
    python3 - "$body" <<'EOF'
import json, sys
d = json.loads(sys.argv[1])
if "members" not in d:
    print(d); sys.exit(0)
print(f"  leader: {d.get('leader') or '?'}  leader_reachable: {d.get('leader_reachable')}")
print(f"  {'id':<8} {'status':<9} {'raft_role':<9} {'partitions':>10}  {'last_heartbeat':>14}  addr")
for m in d["members"]:
    star = "*" if m.get("leader") else ""
    print(f"  {m['id'] + star:<8} {m['status']:<9} {m['raft_role']:<9} {m.get('owned_partitions', 0):>10}  {m.get('last_heartbeat', 0):>14}  {m.get('addr', '')}")
EOF
  else
    echo "$body"
  fi
}

cmd_settle() {
  local topic="${1:?usage: settle TOPIC [SECONDS]}" secs="${2:-60}" i first=""
  for i in $(known_nodes); do
    if pid_of "$i" >/dev/null; then first="$i"; break; fi
  done
  [ -n "$first" ] || { echo "no node running" >&2; return 1; }
  for _ in $(seq 1 "$((secs * 5))"); do
    if curl -sS -m 2 "http://$(http_addr "$first")/v1/topics/$topic" 2>/dev/null | python3 -c '
import json, sys
ps = json.load(sys.stdin).get("partition_stats") or []
pref = lambda p: (p.get("replicas") or [p.get("owner_node")])[0]
sys.exit(0 if ps and all(p.get("leader", pref(p)) == pref(p) for p in ps) else 1)'; then
      return 0
    fi
    sleep 0.2
  done
  echo "$topic: partitions not led by their preferred leaders after $secs s" >&2
  return 1
}

case "${1:-}" in
  start) cmd_start "${2:-3}" ;;
  settle) cmd_settle "${2:-}" "${3:-60}" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  clean) cmd_stop; rm -rf "$base"; echo "removed $base" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
