#!/usr/bin/env bash
# Compares two narad builds side by side on this machine (`make bench-compare BASE=<rev>`):
# builds revision BASE (A) in a temporary git worktree and the working tree (B; or revision
# NEW), then for ROUNDS rounds runs every scenario against a fresh single dev node of each
# build in turn (A then B in odd rounds, B then A in even ones), so both meet the same noise.
# For each run it reads the node's own CPU time (utime + stime from /proc) before and after the
# load, so the load generator sharing the cores is not counted in it; the generator's own CPU
# per message is a figure of its own. Prints per scenario and figure each build's median and
# min–max, and the ratio B/A with its spread over the rounds' pairs. docs/benchmarks.md, "Comparing two
# builds", says how to read it.
#
#   BASE=<rev> [NEW=<rev>] [ROUNDS=3] [SCENARIOS="p64 full64 http32 batch"] [BENCH_MD=1] \
#     [BENCH_LOCK=/tmp/narad-bench.lock] hack/bench-compare.sh
#
# Both builds are driven by the same generators, built from the working tree: `narad bench`
# (fasthttp) and test/cmd/httpload (plain net/http keep-alive). BENCH_LOCK names a lock file held (flock)
# while measuring, not while building, so runs of several people on one machine never overlap;
# the builds run under `nice` so they slow someone else's measurement less.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
GO="${GO:-go}"
base="${BASE:?set BASE=<rev>, the build to compare against}"
new="${NEW:-}"
rounds="${ROUNDS:-3}"
scenarios="${SCENARIOS:-p64 full64 http32 batch}"
host="${BENCH_HOST:-127.0.0.54}"
work="$(mktemp -d)"
pid=""
worktrees=()

cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  for w in "${worktrees[@]}"; do git -C "$root" worktree remove --force "$w" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# build_rev REV OUT: builds narad of a commit in a detached temporary worktree.
build_rev() {
  local dir="$work/src-$2"
  git -C "$root" worktree add --detach -q "$dir" "$1"
  worktrees+=("$dir")
  (cd "$dir" && nice -n 10 "$GO" build -o "$work/$2" ./broker/cmd/narad)
}

# describe REV: the short hash and subject of a commit.
describe() { git -C "$root" log -1 --format='%h %s' "$1"; }

label_a="$(describe "$base")"
echo "building A = $label_a" >&2
build_rev "$base" narad-A
if [ -n "$new" ]; then
  label_b="$(describe "$new")"
  echo "building B = $label_b" >&2
  build_rev "$new" narad-B
  nice -n 10 "$GO" build -o "$work/narad-gen" ./broker/cmd/narad
else
  label_b="working tree at $(describe HEAD)"
  [ -z "$(git status --porcelain --untracked-files=no)" ] || label_b="$label_b, with uncommitted changes"
  echo "building B = $label_b" >&2
  nice -n 10 "$GO" build -o "$work/narad-B" ./broker/cmd/narad
  ln -s "$work/narad-B" "$work/narad-gen"
fi
# The generators and the reference tools come from the working tree, whatever A and B are.
nice -n 10 "$GO" build -o "$work/httpload" ./test/cmd/httpload
(cd "$root/broker" && nice -n 10 "$GO" build -o "$work/fsyncbench" ./cmd/fsyncbench &&
  nice -n 10 "$GO" build -o "$work/cpucal" ./cmd/cpucal)
bench="$work/narad-gen" # one `narad bench` drives both builds

if [ -n "${BENCH_LOCK:-}" ]; then
  exec 9>"$BENCH_LOCK"
  echo "waiting for $BENCH_LOCK" >&2
  flock 9
fi

load="$(cut -d' ' -f1-3 /proc/loadavg)"
fsync_rate="$("$work/fsyncbench" -dir "$work" -n 2000)"
cpucal="$("$work/cpucal")"
tck="$(getconf CLK_TCK)"
addr="$host:17942"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# children_seconds FILE: the user + system seconds of a shell's finished children in FILE, the
# output of bash's `times` (second line). `times` must run in the measuring shell itself, not in
# a $(...): the generator is its child once the $(...) around it has returned; the node is not,
# until it is waited for after the load.
children_seconds() {
  awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } print s }' "$1"
}

# count SCENARIO: the messages one run of the scenario sends.
count() {
  case "$1" in
    p64) echo "${P64_COUNT:-20000}" ;;
    full64) echo "${FULL64_COUNT:-10000}" ;;
    http32) echo "${HTTP32_COUNT:-8000}" ;;
    batch) echo "${BATCH_COUNT:-200000}" ;;
    *) echo "unknown scenario $1" >&2; return 1 ;;
  esac
}

# load SCENARIO N: runs N messages of one scenario's load against $addr, JSON on stdout.
load() {
  local url="http://$addr" n="$2"
  case "$1" in
    p64) "$bench" bench -s "$url" cmp --create --partitions 3 --count "$n" --size 1024 --workers 64 --json ;;
    full64) "$bench" bench -s "$url" cmp --create --partitions 3 --count "$n" --size 1024 --workers 64 \
      --consumers 64 --consume --json ;;
    http32) "$work/httpload" -server "$url" -topic cmp -create -partitions 3 -count "$n" -size 100 \
      -workers 32 -consumers 32 ;;
    batch) "$bench" bench -s "$url" cmp --create --partitions 8 --count "$n" --size 1024 --workers 64 \
      --consumers 64 --consume --batch 100 --json ;;
  esac
}

# one BUILD SCENARIO ROUND: a fresh node of BUILD, the scenario's load, one line appended to
# $results. Runs in this shell (never in $(...)), so the cleanup trap knows the node's pid.
one() {
  local dir="$work/run" out t0 t1 g0 g1 n line
  n="$(count "$2")"
  rm -rf "$dir"; mkdir -p "$dir"
  "$work/narad-$1" serve --dev --node-id cmp --data-dir "$dir/data" --http-addr "$addr" \
    --cluster-addr "$host:17943" --log-level warn >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 150); do curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fsS "http://$addr/readyz" >/dev/null
  t0="$(cpu_ticks "$pid")"
  times >"$dir/times0"; g0="$(children_seconds "$dir/times0")"
  if ! out="$(load "$2" "$n" 2>"$dir/gen.err")"; then
    echo "build $1, scenario $2: the load generator failed:" >&2
    cat "$dir/gen.err" >&2; echo "$out" >&2; tail -20 "$dir/log" >&2
    return 1
  fi
  t1="$(cpu_ticks "$pid")"
  times >"$dir/times1"; g1="$(children_seconds "$dir/times1")"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=""
  line="$(python3 - "$1" "$2" "$3" "$out" "$t0" "$t1" "$tck" "$n" "$g0" "$g1" <<'PY'
import json, sys
build, scenario, rnd, out, t0, t1, tck, n, g0, g1 = sys.argv[1:]
d = json.loads(out)
rate = d["produce_msgs_per_sec"] if scenario == "p64" else d["full_flow_msgs_per_sec"]
cpu_us = (float(t1) - float(t0)) / float(tck) / int(n) * 1e6
gen_us = (float(g1) - float(g0)) / int(n) * 1e6
print(build, scenario, rnd, rate, d["p99_ms"], round(cpu_us, 2), round(gen_us, 2))
PY
  )"
  echo "round $3: $line" >&2
  echo "$line" >>"$results"
}

results="$work/results"
: >"$results"
for r in $(seq 1 "$rounds"); do
  # Odd rounds run A first, even rounds B first, so neither build always follows the other.
  order="A B"; if [ $((r % 2)) -eq 0 ]; then order="B A"; fi
  for s in $scenarios; do
    for b in $order; do one "$b" "$s" "$r"; done
  done
done

python3 "$root/hack/bench-compare-report.py" "$results" "${BENCH_MD:-0}" \
  "$label_a" "$label_b" "$rounds" "$load" "$fsync_rate" "$cpucal" "$(nproc)" "$(uname -sr)"
