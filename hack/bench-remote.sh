#!/usr/bin/env bash
# Remote-children benchmark: how fast a remote child works off a backlog into another
# cluster over loopback, against a local child working off the same backlog.
#
# Source cluster: two nodes (127.0.0.61-62, security off). Target cluster: one node
# (127.0.0.63, security on; the link authenticates as a user with the produce grant only).
# The parent partitions filled are those of one source node whose local child partitions sit
# on the other source node, so both copies leave the parent owner's process: the local one by
# node RPC, the remote one by HTTP batch produce into the target.
#
#   (a) local: the node holding the child is frozen (SIGSTOP) while the parent is filled with
#       N records, then thawed; the rate counts the records copied from the first poll after
#       the thaw that sees no progress (or the first poll at all) until the child's high
#       watermarks reach N.
#   (b) remote: after (a), a remote child is attached with start=oldest; the rate is timed from
#       its first advance of the recovery point until the recovery point reaches N (the
#       reconcile tick that starts its cursor is left out).
#
# Records are keyless (narad bench), so the remote sender uses one lane per parent partition.
# Prints a markdown table on stdout.
# Usage: hack/bench-remote.sh path/to/narad [records] [size]
#   BENCH_REMOTE_COUNT (default 500000: fewer leave the local copy under 3 s on 2 cores, where
#   one poll's latency counts), BENCH_REMOTE_SIZE (default 1024)
set -euo pipefail
narad="${1:?usage: hack/bench-remote.sh path/to/narad [records] [size]}"
count="${2:-${BENCH_REMOTE_COUNT:-500000}}"
size="${3:-${BENCH_REMOTE_SIZE:-1024}}"
work="$(mktemp -d)"
pids=()
stopped=""
cleanup() {
  [ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
log() { echo "bench-remote: $*" >&2; }

admin_pw="bench-Admin-pw-1"
link_pw="bench-Link-pw-1"
src1="http://127.0.0.61:17942" src2="http://127.0.0.62:17942" dst="http://127.0.0.63:17942"

# serve <id> <host> <secret> <security> <bootstrap|join-addr>
serve() {
  local id="$1" host="$2" secret="$3" security="$4" how=(--bootstrap)
  [ "$5" = bootstrap ] || how=(--join "$5")
  NARAD_CLUSTER_SECRET="$secret" NARAD_ADMIN_PASSWORD="$admin_pw" "$narad" serve --node-id "$id" \
    --data-dir "$work/$host" --http-addr "$host:17942" --cluster-addr "$host:17943" \
    --security-enabled="$security" --log-format json "${how[@]}" >"$work/$host.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 150); do
    curl -fsS "http://$host:17942/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "$id on $host not ready"; tail -20 "$work/$host.log" >&2; exit 1
}
serve n1 127.0.0.61 "bench-remote-src-$$" false bootstrap
serve t1 127.0.0.63 "bench-remote-dst-$$" true bootstrap
serve n2 127.0.0.62 "bench-remote-src-$$" false 127.0.0.61:17943
pid_of=([1]="${pids[0]}" [2]="${pids[2]}")
alive() { curl -fsS "$src1/v1/cluster/members" | grep -o '"status":"alive"' | wc -l; }
for _ in $(seq 1 150); do
  [ "$(alive)" = 2 ] && break
  sleep 0.2
done
[ "$(alive)" = 2 ] || { log "n2 did not join: $(curl -fsS "$src1/v1/cluster/members")"; tail -5 "$work/127.0.0.62.log" >&2; exit 1; }

# j <url> <python expression over d>: a field of a JSON answer.
j() { curl -fsS "$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }
curl -fsS -XPOST "$src1/v1/topics" -d '{"name":"br-parent","partitions":3}' >/dev/null
curl -fsS -XPOST "$src1/v1/topics" -d '{"name":"br-local","partitions":3,"parent":"br-parent"}' >/dev/null
owners() { j "$src1/v1/topics/$1" '" ".join(p["owner_node"] or "-" for p in sorted(d["partition_stats"], key=lambda p: p["index"]))'; }
for _ in $(seq 1 50); do
  read -r -a po <<<"$(owners br-parent)"; read -r -a co <<<"$(owners br-local)"
  [[ " ${po[*]} ${co[*]} " != *" - "* ]] && break
  sleep 0.2
done
# The filling node X owns the most parent partitions; the partitions filled are X's whose child
# partition is on the other node Y, which is frozen during the fill.
n1parts=() n2parts=()
for i in 0 1 2; do
  [ "${po[$i]}" != "${co[$i]}" ] || continue
  if [ "${po[$i]}" = n1 ]; then n1parts+=("$i"); else n2parts+=("$i"); fi
done
if [ "${#n1parts[@]}" -ge "${#n2parts[@]}" ]; then x=n1 y=n2 parts=("${n1parts[@]}"); else x=n2 y=n1 parts=("${n2parts[@]}"); fi
[ "${#parts[@]}" -gt 0 ] || { log "no parent partition with its child partition on the other node: ${po[*]} / ${co[*]}"; exit 1; }
x_url="http://127.0.0.6${x#n}:17942"
child_pid="${pid_of[${y#n}]}"
log "parent owners ${po[*]}, local child owners ${co[*]}: filling partitions ${parts[*]} through $x, $y frozen"

auth=(-u "admin:$admin_pw")
curl -fsS "${auth[@]}" -XPOST "$dst/v1/topics" -d '{"name":"br-remote","partitions":3}' >/dev/null
curl -fsS "${auth[@]}" -XPOST "$dst/v1/users" \
  -d "{\"username\":\"replicator\",\"password\":\"$link_pw\",\"grants\":[{\"action\":\"produce\",\"patterns\":[\"br-*\"]}]}" >/dev/null

# (a) The child's node is frozen during the fill: the parent owner's cursor cannot commit, so
# the whole fill is a backlog when the node is thawed.
kill -STOP "$child_pid"; stopped="$child_pid"
log "filling br-parent with $count x $size B (${y} frozen)"
per=$((count / ${#parts[@]}))
count=$((per * ${#parts[@]}))
fills=()
for p in "${parts[@]}"; do
  "$narad" bench br-parent --partition "$p" --count "$per" --size "$size" --workers 8 --batch 100 --server "$x_url" --json >"$work/fill-$p.json" &
  fills+=($!)
done
for f in "${fills[@]}"; do wait "$f"; done
hwm_sum() { j "$x_url/v1/topics/$1" 'sum(p["high_watermark"] for p in d["partition_stats"] if p["owner_node"] == "'"$x"'")'; }
for _ in $(seq 1 600); do
  [ "$(hwm_sum br-parent)" -ge "$count" ] && break
  sleep 0.1
done
bytes="$(j "$x_url/v1/topics/br-parent" 'sum(p["size_bytes"] for p in d["partition_stats"] if p["owner_node"] == "'"$x"'")')"
kill -CONT "$child_pid"; stopped=""

# track <what> <count> <python expression giving the current position>: prints "<start> <done>
# <position at start>" once the position reaches count, where start is the last poll before
# the position first moved (so the timed span holds the whole copy, and at most one idle poll).
track() {
  python3 - "$2" "$3" <<'PY'
import json, sys, time, urllib.request
want, expr = int(sys.argv[1]), sys.argv[2]
def pos():
    return eval(expr, {"json": json, "get": lambda u: json.load(urllib.request.urlopen(u, timeout=10))})
start = pos()
idle = time.time()  # the last poll that saw no progress: the copy began after it
first = None
deadline = time.time() + 600
while time.time() < deadline:
    p = pos()
    now = time.time()
    if first is None:
        if p > start:
            first = idle
        else:
            idle = now
    if p >= want:
        print("%.6f %.6f %d" % (first, now, start))
        sys.exit(0)
    time.sleep(0.02)
sys.exit("no completion within 600 s")
PY
}
log "local child: waiting for $count records"
read -r l0 l1 lpos < <(track local "$count" "sum(p['high_watermark'] for p in get('$x_url/v1/topics/br-local')['partition_stats'])")
[ -n "${l1:-}" ] || { log "the local child did not reach $count records"; exit 1; }

# (b) The remote child starts at the oldest record of the same parent.
log "remote child: attach start=oldest, waiting for the recovery point to reach $count"
curl -fsS -XPOST "$x_url/v1/topics/br-parent/children" -d "{\"remote\":{\"url\":\"$dst\",\"topic\":\"br-remote\",\"user\":\"replicator\",\"password\":\"$link_pw\"},\"start\":\"oldest\"}" >/dev/null
rp_expr="sum(sum(c.get('recovery_point', {}).values()) for c in get('$x_url/v1/topics/br-parent/children')['children'] if c.get('kind') == 'remote')"
read -r r0 r1 rpos < <(track remote "$count" "$rp_expr")
[ -n "${r1:-}" ] || { log "the remote child's recovery point did not reach $count"; exit 1; }
state="$(j "$src1/v1/topics/br-parent/children" '[c["state"] for c in d["children"] if c.get("kind") == "remote"][0]')"
# A 202 is durable acceptance; the target commits right after: wait for its high watermarks.
target_hwm() { curl -fsS "${auth[@]}" "$dst/v1/topics/br-remote" | python3 -c 'import json,sys; print(sum(p["high_watermark"] for p in json.load(sys.stdin)["partition_stats"]))'; }
for _ in $(seq 1 300); do [ "$(target_hwm)" -ge "$count" ] && break; sleep 0.1; done
target_hwm="$(target_hwm)"
sent_bytes="$(curl -fsS "$src1/metrics" "$src2/metrics" | awk '/^narad_fanout_remote_sent_bytes_total/ {s += $2} END {printf "%.0f", s}')"

python3 - "$count" "$size" "$l0" "$l1" "$lpos" "$r0" "$r1" "$rpos" "$bytes" "$state" "$target_hwm" "$sent_bytes" "${#parts[@]}" "$work"/fill-*.json <<'PY'
import json, sys
count, size = int(sys.argv[1]), int(sys.argv[2])
l0, l1, lpos, r0, r1, rpos = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8])
log_bytes, state, target_hwm, sent = int(sys.argv[9]), sys.argv[10], int(sys.argv[11]), int(sys.argv[12])
nparts = int(sys.argv[13])
fill_rate = sum(json.load(open(f)).get("produce_msgs_per_sec", 0) for f in sys.argv[14:])
def row(name, n, secs):
    print("| %s | %s | %.2f | %s | %.1f |" % (name, format(n, ","), secs, format(round(n / secs), ","), n * size / secs / 1e6))
ln, rn = count - lpos, count - rpos
ls, rs = l1 - l0, r1 - r0
print("## Remote children")
print()
print("Two clusters on loopback: source n1+n2 (127.0.0.61-62), target t1 (127.0.0.63, security on). %d parent" % nparts)
print("partitions on one source node hold %s keyless %d B records (%.0f MB of log), copied by a local child" % (format(count, ","), size, log_bytes / 1e6))
print("(partitions on the other source node, node RPC) and by a remote child (start=oldest, HTTP batch produce")
print("into the target, one lane per parent partition).")
print("Rates count payload bytes, from the first copied record to the last.")
print()
print("| copy | records | seconds | records/s | MB/s |")
print("|---|---|---|---|---|")
row("local child (backlog after a thaw of its node)", ln, ls)
row("remote child (start=oldest)", rn, rs)
print()
print("- Remote / local copy rate: **%.0f%%** (target >= 50%%)." % (100 * (rn / rs) / (ln / ls)))
print("- Fill: %s msg/s batched produce into the parent (narad bench per partition, 8 workers, batch 100)." % format(round(fill_rate), ","))
print("- Remote link state at the end: %s; the target topic holds %s records (%s duplicates); narad_fanout_remote_sent_bytes_total %.0f MB." % (state, format(target_hwm, ","), format(target_hwm - count, ","), sent / 1e6))
PY
