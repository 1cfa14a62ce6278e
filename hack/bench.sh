#!/usr/bin/env bash
# Benchmarks a fresh single node with `narad bench` and writes docs/benchmarks.md.
# Usage: hack/bench.sh path/to/narad
set -euo pipefail
narad="${1:?usage: hack/bench.sh path/to/narad}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/docs/benchmarks.md"
work="$(mktemp -d)"
addr="127.0.0.1:17942"
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

"$narad" serve --dev --data-dir "$work/data" --http-addr "$addr" --cluster-addr 127.0.0.1:17943 \
  --log-level warn >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://$addr/readyz" >/dev/null

export NARAD_ADDR="http://$addr"
count="${BENCH_COUNT:-50000}"
run() { "$narad" bench "$@" --json; }

# The disk's own fsync rate, for reference (4 KiB writes + fdatasync).
fsync_rate="$(cd "$root/broker" && go run ./cmd/fsyncbench -dir "$work" -n 2000)"

p1="$(run bench-p1 --create --partitions 3 --count "$count" --size 1024 --workers 1)"
p16="$(run bench-p16 --create --partitions 3 --count "$count" --size 1024 --workers 16)"
p64="$(run bench-p64 --create --partitions 3 --count "$count" --size 1024 --workers 64)"
full="$(run bench-full --create --partitions 3 --count "$count" --size 1024 --workers 64 --consumers 64 --consume)"
batch="$(run bench-batch --create --partitions 3 --count "$((count * 10))" --size 1024 --workers 64 --consumers 64 --consume --batch 100)"

field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], ''))" "$1" "$2"; }
row() {
  local flow; flow="$(field "$2" full_flow_msgs_per_sec)"
  [ "$flow" = "0" ] || [ -z "$flow" ] && flow="-"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$(field "$2" produce_msgs_per_sec)" "$(field "$2" p50_ms)" \
    "$(field "$2" p95_ms)" "$(field "$2" p99_ms)" "$flow"
}

{
  echo "# Benchmarks"
  echo
  echo "Measured with \`make bench\` (hack/bench.sh): a fresh single node (\`narad serve --dev\`),"
  echo "1 KiB messages, topics with 3 partitions, driven by \`narad bench\` on the same machine."
  echo
  echo "- Date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "- Commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- Disk fsync rate (4 KiB write + fdatasync, same filesystem): ${fsync_rate}"
  echo
  echo "| scenario | produce msg/s | p50 ms | p95 ms | p99 ms | full flow msg/s |"
  echo "|---|---|---|---|---|---|"
  row "produce, 1 producer" "$p1"
  row "produce, 16 producers" "$p16"
  row "produce, 64 producers" "$p64"
  row "full flow, 64 producers + 64 consumers" "$full"
  row "full flow, batch 100, 64 + 64" "$batch"
  echo
  echo "Reproduce: \`make bench\` (set BENCH_COUNT to change the message count, default 50000;"
  echo "the batched run uses ten times as many). Load generator and broker share the machine."
  echo
  cat "$root/hack/bench-notes.md"
} >"$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
