#!/usr/bin/env bash
# Replication benchmarks (docs/benchmarks.md, "Replicated topics: failover and catch-up"):
#   failover  the time from a kill -9 of a partition's leader to the first 202 from the new
#             leader, through a node that does not lead it (R = 3, M = 2, every record pinned to
#             partition 0, so no keyless reroute hides the failover), at the default
#             --replica-failover-after 10s;
#   catch-up  the rate at which a node that returns with an empty data directory copies its
#             replicas back (R = 3, M = 2, BENCH_CATCHUP_MIB of 8 KiB records), against the
#             disk's sequential write rate measured in the same run, and the three nodes' CPU
#             time over it (utime + stime from /proc) per GiB copied.
# Three fresh nodes on loopback (127.0.0.51-53, HTTP 17942, node RPC 17943, pprof 16060), every
# other setting at its default. Prints a markdown section on stdout (kept in
# hack/bench-notes-replication.md, which `make bench` puts into the page), progress on stderr.
# Usage: hack/bench-replication.sh path/to/narad
#   BENCH_FAILOVER_REPS=N        failovers to measure (default 3)
#   BENCH_CATCHUP_MIB=N          MiB written before the follower is wiped (default 1024)
#   BENCH_CATCHUP_PARTITIONS=N   partitions of the catch-up topic (default 3)
#   BENCH_CATCHUP_REPS=N         catch-ups to measure, each wiping another node (default 1)
#   BENCH_PPROF_DIR=dir          CPU profiles of the three nodes during a catch-up (BENCH_PPROF_SECONDS,
#                                default 10, from BENCH_PPROF_DELAY seconds after the restart, 0.3);
#                                BENCH_PPROF_KIND=trace takes execution traces instead (`go tool trace`)
#   BENCH_KEEP=dir               copy the node logs and the failover answer logs there
#   BENCH_ADDR_PREFIX=127.0.0.5  node I listens on ${BENCH_ADDR_PREFIX}I (another prefix lets two
#                                runs share a machine)
set -euo pipefail
narad="$(cd "$(dirname "${1:?usage: hack/bench-replication.sh path/to/narad}")" && pwd)/$(basename "$1")"
root="$(cd "$(dirname "$0")/.." && pwd)"
reps="${BENCH_FAILOVER_REPS:-3}"
mib="${BENCH_CATCHUP_MIB:-1024}"
cparts="${BENCH_CATCHUP_PARTITIONS:-3}"
creps="${BENCH_CATCHUP_REPS:-1}"
work="$(mktemp -d)"
declare -A pid=()
cleanup() {
  kill -9 "${pid[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  if [ -n "${BENCH_KEEP:-}" ]; then mkdir -p "$BENCH_KEEP" && cp "$work"/*.log "$work"/*.txt "$BENCH_KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
log() { echo "bench-replication: $*" >&2; }

host() { echo "${BENCH_ADDR_PREFIX:-127.0.0.5}$1"; }
url() { echo "http://$(host "$1"):17942"; }
id_of() { echo "n$1"; }
idx_of() { echo "${1#n}"; }

(cd "$root/broker" && go build -o "$work/replbench" ./cmd/replbench)
replbench="$work/replbench"

# node_ticks I: node I's CPU time so far, in clock ticks (utime + stime).
node_ticks() { awk '{print $14 + $15}' "/proc/${pid[$1]}/stat"; }

# start_node I: node I (n1 bootstraps on its first start; every other start joins through the
# other two nodes, as a node that returns with an empty data directory must).
booted=""
start_node() {
  local i="$1" j how=()
  if [ "$i" = 1 ] && [ -z "$booted" ]; then
    how=(--bootstrap)
    booted=1
  else
    local peers=""
    for j in 1 2 3; do [ "$j" = "$i" ] || peers="${peers:+$peers,}$(host "$j"):17943"; done
    how=(--join "$peers")
  fi
  "$narad" serve --node-id "$(id_of "$i")" --data-dir "$work/n$i" --http-addr "$(host "$i"):17942" \
    --cluster-addr "$(host "$i"):17943" --pprof-addr "$(host "$i"):16060" --security-enabled=false \
    --log-format json "${how[@]}" >>"$work/n$i.log" 2>&1 &
  pid[$i]=$!
}
wait_ready() {
  for _ in $(seq 1 300); do
    curl -fsS -m 1 "$(url "$1")/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "n$1 not ready; last log lines:"; tail -n 20 "$work/n$1.log" >&2; return 1
}
members() { curl -fsS -m 5 "$(url "$1")/v1/cluster/members"; }
# until SECONDS WHAT CMD…: poll CMD every 0.2 s until it succeeds.
until_ok() {
  local secs="$1" what="$2"; shift 2
  for _ in $(seq 1 $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "timed out after ${secs}s waiting for $what"; return 1
}
all_alive_voters() {
  members "$1" | python3 -c 'import json,sys; m=json.load(sys.stdin)["members"]; sys.exit(0 if len(m)==3 and all(x["status"]=="alive" and x["raft_role"]=="voter" for x in m) else 1)'
}
raft_leader() { members "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("leader") or "")'; }
# pstat I TOPIC EXPR: EXPR over the partitions (list p) of TOPIC as node I describes it.
pstat() {
  curl -fsS -m 5 "$(url "$1")/v1/topics/$2" | python3 -c "import json,sys; p=json.load(sys.stdin)['partition_stats']; print($3)"
}
in_sync() { [ "$(pstat "$1" "$2" 'all(len(x.get("isr") or [])==3 and x.get("leader") for x in p)')" = True ]; }
led_by_preferred() { [ "$(pstat "$1" "$2" 'all(x.get("leader")==(x.get("replicas") or [""])[0] for x in p)')" = True ]; }
# create_topic NAME PARTITIONS: R = 3, M = 2 (retried while the members settle).
create_topic() {
  local out=""
  for _ in $(seq 1 50); do
    out="$(curl -sS -XPOST "$(url 1)/v1/topics" -w ' %{http_code}' \
      -d "{\"name\":\"$1\",\"partitions\":$2,\"replication_factor\":3,\"min_insync_replicas\":2}")"
    case "$out" in *" 20"[01]) return 0 ;; esac
    sleep 0.2
  done
  log "create $1: $out"
  return 1
}

# The machine and the disk, before the nodes start.
cpu="$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
fsync_rate="$(cd "$root/broker" && go run ./cmd/fsyncbench -dir "$work" -n 2000)"
# The disk's sequential write rate on the data filesystem: 1 GiB, one fdatasync at the end, the
# median of three runs (a shared virtual disk varies from run to run).
dd_once() {
  dd if=/dev/zero of="$work/dd.tmp" bs=1M count=1024 conv=fdatasync 2>&1 |
    awk '/copied/ { printf "%.0f\n", $1 / $(NF-3) / 1e6 }'
  rm -f "$work/dd.tmp"
}
dd_median() { for _ in 1 2 3; do dd_once; done | sort -n | tr '\n' ' '; }
seq_all="$(dd_median)"
log "disk: ${fsync_rate}; sequential ${seq_all}MB/s"

export NARAD_CLUSTER_SECRET="bench-replication-$$-$(date +%s)"
for i in 1 2 3; do
  start_node "$i"
  wait_ready "$i"
done
until_ok 60 "three alive voters" all_alive_voters 1

# --- Failover -----------------------------------------------------------------------------
create_topic fo 3 # the least a topic may have; every record goes to partition 0
until_ok 60 "fo in sync" in_sync 1 fo
: >"$work/failover.txt"
done_reps=0
for rep in $(seq 1 $((reps * 2))); do
  [ "$done_reps" -ge "$reps" ] && break
  leader="$(pstat 1 fo 'p[0]["leader"]')"
  v="$(idx_of "$leader")"
  s=1; [ "$s" = "$v" ] && s=2
  ctrl="$(raft_leader "$s")"
  also=no; [ "$ctrl" = "$leader" ] && also=yes
  epoch="$(pstat "$s" fo 'p[0]["leader_epoch"]')"
  log "failover $rep: killing $leader (epoch $epoch, Raft leader $ctrl), producing through n$s"
  out="$("$replbench" failover -server "$(url "$s")" -topic fo -partition 0 -kill-pid "${pid[$v]}" -log "$work/failover-$rep.txt")"
  wait "${pid[$v]}" 2>/dev/null || true
  new="$(pstat "$s" fo 'p[0]["leader"]+" "+str(p[0]["leader_epoch"])')"
  log "failover $rep: $out; now led by $new"
  echo "$rep $leader $also $new $out" >>"$work/failover.txt"
  [ "$also" = no ] && done_reps=$((done_reps + 1))
  start_node "$v"
  wait_ready "$v"
  until_ok 120 "fo back in sync" in_sync "$s" fo
  until_ok 60 "three alive voters" all_alive_voters "$s"
  # The preferred-leader rule gives the partition back within a controller tick or two; the
  # next repetition starts from that settled state.
  until_ok 60 "fo led by its preferred leader" led_by_preferred "$s" fo || true
done

# --- Catch-up -----------------------------------------------------------------------------
count=$((mib * 128)) # 8 KiB records
create_topic cu "$cparts"
until_ok 60 "cu in sync" in_sync 1 cu
log "filling cu with $count x 8 KiB"
servers="$(url 1),$(url 2),$(url 3)"
NARAD_ADDR="$(url 1)" "$narad" bench cu --count "$count" --size 8192 --batch 100 --workers 8 \
  --servers "$servers" --json >"$work/fill.json"
hwm_total() { pstat "$1" cu 'sum(x.get("high_watermark",0) for x in p)'; }
filled() { [ "$(hwm_total "$1")" -ge "$count" ] && in_sync "$1" cu; }
until_ok 600 "cu filled and in sync" filled 1
: >"$work/catchup.txt"
victim=0
for rep in $(seq 1 "$creps"); do
  ctrl="$(raft_leader "$((victim == 1 ? 2 : 1))")"
  # Wipe a node that is not the Raft leader (the catch-up, not a metadata election, is
  # measured), and not the one wiped last.
  prev="$victim"
  for cand in 3 2 1; do
    [ "$(id_of "$cand")" != "$ctrl" ] && [ "$cand" != "$prev" ] && { victim="$cand"; break; }
  done
  s=1; [ "$s" = "$victim" ] && s=2
  log "catch-up $rep: killing $(id_of "$victim") and deleting its data directory"
  kill -9 "${pid[$victim]}"
  wait "${pid[$victim]}" 2>/dev/null || true
  rm -rf "$work/n$victim"
  # Wait for the failover of the partitions it led, so the copy runs against settled leaders.
  not_led() { [ "$(pstat "$s" cu "all(x.get('leader') not in ('', None, '$(id_of "$victim")') for x in p)")" = True ]; }
  until_ok 60 "the wiped node's partitions failed over" not_led
  near_all="$(dd_median)"
  log "catch-up $rep: sequential write right before the restart ${near_all}MB/s"
  # The nodes' CPU over the catch-up (utime + stime from /proc): the returning node's since
  # its start, the others' from here on.
  declare -A cpu0=()
  for i in 1 2 3; do [ "$i" = "$victim" ] || cpu0[$i]="$(node_ticks "$i")"; done
  start_ns="$(date +%s%N)"
  start_node "$victim"
  cpu0[$victim]=0
  if [ -n "${BENCH_PPROF_DIR:-}" ]; then
    mkdir -p "$BENCH_PPROF_DIR"
    (sleep "${BENCH_PPROF_DELAY:-0.3}"; for i in 1 2 3; do
      curl -fsS -o "$BENCH_PPROF_DIR/catchup$rep-n$i.pprof" "http://$(host "$i"):16060/debug/pprof/${BENCH_PPROF_KIND:-profile}?seconds=${BENCH_PPROF_SECONDS:-10}" &
    done; wait) &
  fi
  out="$("$replbench" catchup -server "$(url "$s")" -follower "$(url "$victim")" -topic cu \
    -replica "$(id_of "$victim")" -start-ns "$start_ns")"
  cpu=""
  for i in 1 2 3; do cpu="${cpu:+$cpu,}$(( $(node_ticks "$i") - ${cpu0[$i]} ))"; done
  log "catch-up $rep: $out; node CPU ticks n1,n2,n3 $cpu"
  echo "$rep $(id_of "$victim") $(echo "$near_all" | awk '{print $2}') $cpu $out" >>"$work/catchup.txt"
  until_ok 60 "three alive voters" all_alive_voters "$s"
done

# --- Report -------------------------------------------------------------------------------
python3 - "$work" "$(nproc)" "$cpu" "$fsync_rate" "$seq_all" "$mib" "$cparts" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, os, statistics, sys, time
work, ncpu, cpu, fsync_rate, seq_all, mib, cparts, commit = sys.argv[1:9]
seq = [float(x) for x in seq_all.split()]
print("## Replicated topics: failover and catch-up")
print()
print("Measured with `make bench-replication` (hack/bench-replication.sh) on %s, commit %s:" % (time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), commit))
print("three fresh nodes on loopback (127.0.0.51-53), every setting at its default")
print("(`--replica-failover-after 10s`, heartbeats every 5 s), the load generator on the same machine.")
print()
print("- Machine: %s cores, %s" % (ncpu, cpu))
print("- Disk, data filesystem: fsync %s; sequential write %s MB/s (dd 1 GiB, conv=fdatasync, three runs)" % (fsync_rate, " / ".join("%.0f" % x for x in seq)))
print()
print("**Failover** (target: within `--replica-failover-after` + 3 s = 13 s). A topic with 3")
print("partitions (the least allowed), R = 3, M = 2; `replbench failover` produces one small record")
print("every 10 ms to partition 0 (`?partition=0`: no keyless reroute to another partition) through a")
print("node that does not lead it, kills that partition's leader with `kill -9` after 3 s, and takes")
print("the time from the kill to the first `202` answering a produce sent after the kill. The killed")
print("node is restarted and back in every ISR before the next repetition.")
print()
print("| rep | killed leader | also the Raft leader | new leader, epoch | kill → first 202 | answers before it (status: count) |")
print("|---|---|---|---|---|---|")
plain = []
for line in open(work + "/failover.txt"):
    rep, leader, also, new, epoch, js = line.split(" ", 5)
    r = json.loads(js)
    if also == "no":
        plain.append(r["failover_ms"] / 1000)
    answers = ", ".join("%s: %d" % (k if k != "0" else "no answer", v) for k, v in sorted(r["answers_after_kill"].items()))
    print("| %s | %s | %s | %s, %s | %.2f s | %s |" % (rep, leader, also, new, epoch, r["failover_ms"] / 1000, answers))
if plain:
    print()
    print("Kill → first `202` where the killed node was not also the Raft leader: %s s (max %.2f s, target 13 s: %s)." % (
        " / ".join("%.2f" % x for x in plain), max(plain), "met" if max(plain) <= 13 else "**not met**"))
print()
print("**Catch-up** (target: at least 50 %% of the disk's sequential write rate). A topic with %s" % cparts)
print("partitions, R = 3, M = 2, filled with %s MiB of 8 KiB records (`narad bench --batch 100 --size 8192`" % mib)
print("through all three nodes); a node that is not the Raft leader is killed with `kill -9`, its data")
print("directory deleted, and once its partitions have failed over it is started again (`--join`, the")
print("same node id) and copies every replica from the leaders. `replbench catchup` polls the topic")
print("every 100 ms until the node is in the ISR of every partition with a lag of 0. The rate is the")
print("partitions' size over that time; the disk rate is dd's, measured again right before the restart.")
print("CPU is the three nodes' utime + stime from the restart to in sync, per GiB copied, and the")
print("returning node's share of it.")
print()
print("| rep | wiped node | bytes copied | start → in sync | first fetched byte → in sync | rate (whole / copy) | dd right before | ratio (whole / copy) | nodes' CPU per GiB (returning node) |")
print("|---|---|---|---|---|---|---|---|---|")
tck = os.sysconf("SC_CLK_TCK")
for line in open(work + "/catchup.txt"):
    rep, node, near, cpu, js = line.split(" ", 4)
    r, near = json.loads(js), float(near)
    ticks = [int(x) for x in cpu.split(",")]
    gib = r["bytes"] / (1 << 30)
    back = ticks[int(node[1:]) - 1]  # node is "nI"
    whole = r["bytes"] / 1e6 / (r["total_ms"] / 1000)
    copy = r["bytes"] / 1e6 / (r["copy_ms"] / 1000) if r["copy_ms"] > 0 else 0
    print("| %s | %s | %.0f MB (%.0f MB fetched) | %.1f s | %.1f s | %.0f / %.0f MB/s | %.0f MB/s | %.0f %% / %.0f %% | %.2f CPU-s (%.2f) |" % (
        rep, node, r["bytes"] / 1e6, r["in_bytes"] / 1e6, r["total_ms"] / 1000, r["copy_ms"] / 1000, whole, copy, near,
        100 * whole / near, 100 * copy / near, sum(ticks) / tck / gib if gib else 0, back / tck / gib if gib else 0))
PY
