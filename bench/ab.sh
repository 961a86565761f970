#!/usr/bin/env bash
# ab.sh: compares two scalestore builds on the in-memory YCSB lookup of issue
# 3 the way this repository's figures were compared. On a shared VM the
# memory latency drifts by 10-20% within an hour, so two runs made one after
# the other differ by more than most changes do. Here both builds run at the
# same time, one thread each, pinned to different cores (swapped every pair),
# so that they see the same host; the figure is the geometric mean of the
# per-pair ratios B/A. Two copies of one binary give 0.97 this way, with
# pairs from 0.89 to 1.04: read a result inside that band as no difference.
set -euo pipefail
usage() {
	cat <<'EOF'
usage: bench/ab.sh [flags] A B
Runs `A ycsb` and `B ycsb` side by side, one thread each, pinned to CPUs 0
and 1 (swapped every pair), and prints B's ops/s against A's per pair and
the geometric mean of the ratios.
  --pairs N       pairs of runs (default 6)
  --records N     records (default 2000000)
  --read-ratio R  share of reads (default 1)
  --zipf THETA    0 for uniform keys (default 0)
  --duration D    seconds per run (default 5)
  --cache SIZE    cache of each run (default 2GiB: all in memory)
  -h, --help      this text

The two runs share the CPU's last-level cache, so each sees about half of
it: a change that works through what stays in the cache (the size or the
fill of the inner nodes, what a lookup hints) can read differently here
than alone. Check such a change with runs one after the other too.

Needs two CPUs and taskset (util-linux). Exits non-zero if a run fails,
never because of the figures.
EOF
}

pairs=6 records=2000000 ratio=1 zipf=0 duration=5 cache=2GiB
while [ $# -gt 0 ]; do
	case "$1" in
	--pairs) pairs=$2; shift 2 ;;
	--records) records=$2; shift 2 ;;
	--read-ratio) ratio=$2; shift 2 ;;
	--zipf) zipf=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "ab: unknown flag $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 2 ] || { echo "ab: want two binaries, A and B (see --help)" >&2; exit 2; }
a=$1 b=$2
for n in "$pairs" "$records" "$duration"; do
	case "$n" in '' | *[!0-9]*) echo "ab: '$n' is not a whole number" >&2; exit 2 ;; esac
	[ "$n" -gt 0 ] || { echo "ab: --pairs, --records and --duration must be above 0" >&2; exit 2; }
done
for x in "$a" "$b"; do
	[ -x "$x" ] || { echo "ab: $x is not an executable" >&2; exit 1; }
done
command -v taskset >/dev/null || { echo "ab: taskset not found (apt install util-linux)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "ab: needs two CPUs, this machine has $(nproc)" >&2; exit 1; }

args=(ycsb --engine scalestore --records "$records" --read-ratio "$ratio" --zipf "$zipf"
	--threads 1 --duration "${duration}s" --warmup 1s --cache "$cache" --json)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ops prints the ops_per_sec of a run's JSON line.
ops() { grep -o '"ops_per_sec":[0-9.]*' "$1" | cut -d: -f2 | cut -d. -f1; }

printf '%-5s %12s %12s %7s\n' pair "A ops/s" "B ops/s" "B/A"
logsum=0
for i in $(seq 1 "$pairs"); do
	ca=$(((i + 1) % 2)) cb=$((i % 2))
	GOMAXPROCS=1 taskset -c "$ca" "$a" "${args[@]}" >"$tmp/a" 2>"$tmp/a.err" &
	pa=$!
	GOMAXPROCS=1 taskset -c "$cb" "$b" "${args[@]}" >"$tmp/b" 2>"$tmp/b.err" &
	pb=$!
	wait "$pa" || { cat "$tmp/a.err" >&2; exit 1; }
	wait "$pb" || { cat "$tmp/b.err" >&2; exit 1; }
	oa=$(ops "$tmp/a") ob=$(ops "$tmp/b")
	[ -n "$oa" ] && [ -n "$ob" ] || { echo "ab: a run printed no ops_per_sec" >&2; exit 1; }
	r=$(awk -v a="$oa" -v b="$ob" 'BEGIN { printf "%.3f", b / a }')
	printf '%-5s %12s %12s %7s\n' "$i" "$oa" "$ob" "$r"
	logsum=$(awk -v s="$logsum" -v r="$r" 'BEGIN { printf "%.9f", s + log(r) }')
done
awk -v s="$logsum" -v n="$pairs" 'BEGIN { printf "geometric mean of B/A over %d pairs: %.3f\n", n, exp(s / n) }'
