#!/usr/bin/env bash
# ssd-vs-fio.sh: the out-of-memory target of issue 3, measured the way it is
# judged. It runs `scalestore ycsb` (uniform reads of data about 4x the cache,
# from an O_DIRECT store) and fio's 4 KiB random reads (io_uring, depth 32,
# O_DIRECT) over the region of the same store file that holds the data, one
# after the other, PAIRS times, and prints every pair with the share of the
# VM's CPU time the host took meanwhile (steal), then the ratio over all pairs.
#
# Alternating matters: on a shared host the disk and the CPUs vary by 10-20%
# from minute to minute, so a ratio is only meaningful between runs made next
# to each other. The first run loads the records into DATA (about 20 s, 1.3
# GB written to a 4.1 GB sparse file); later runs reuse them (--skip-load).
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bench/ssd-vs-fio.sh [flags]

Runs scalestore ycsb and fio in alternation on the same store file and prints
ops/s against fio's IOPS per pair and overall (the target is >= 0.8x).

  --pairs N       pairs of runs (default 3)
  --data DIR      store directory, on a filesystem that accepts O_DIRECT
                  (default bench-data/ssd in the current directory)
  --records N     records (default 8000000)
  --cache SIZE    scalestore's cache (default 256MiB: data about 4x the cache)
  --threads T     ycsb threads (default 32, as fio's depth)
  --duration D    seconds per run (default 10)
  --warmup W      seconds of ycsb warm-up before each measured run (default 3)
  --disk-warmup S seconds of ycsb and then of fio, not counted, before the
                  first pair (default 5; 0: none): this VM's virtual disk
                  reads at a tenth of its speed for its first seconds after
                  a pause, which once made a first pair 6,162 against 6,819
  --bin PATH      the scalestore binary (default bin/scalestore; `make build`)
  -h, --help      this text

Needs fio (apt install fio). Exits non-zero if a run fails, never because of
the figures: they depend on the machine.
EOF
}

pairs=3 data=bench-data/ssd records=8000000 cache=256MiB threads=32 duration=10 warmup=3 diskwarmup=5 bin=bin/scalestore
while [ $# -gt 0 ]; do
	case "$1" in
	--pairs) pairs=$2; shift 2 ;;
	--data) data=$2; shift 2 ;;
	--records) records=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--disk-warmup) diskwarmup=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "ssd-vs-fio: unknown flag $1 (see --help)" >&2; exit 2 ;;
	esac
done
for n in "$pairs" "$records" "$threads" "$duration" "$warmup" "$diskwarmup"; do
	case "$n" in '' | *[!0-9]*) echo "ssd-vs-fio: '$n' is not a whole number" >&2; exit 2 ;; esac
done
for n in "$pairs" "$records" "$threads" "$duration"; do
	[ "$n" -gt 0 ] || { echo "ssd-vs-fio: --pairs, --records, --threads and --duration must be above 0" >&2; exit 2; }
done
command -v fio >/dev/null || { echo "ssd-vs-fio: fio not found (apt install fio)" >&2; exit 1; }
[ -x "$bin" ] || { echo "ssd-vs-fio: $bin not found (run make build, or pass --bin)" >&2; exit 1; }
mkdir -p "$data"

# cpu_ticks prints the total and the steal ticks of all CPUs (/proc/stat).
cpu_ticks() { awk '/^cpu / {t=0; for (i=2; i<=NF; i++) t+=$i; print t, $9}' /proc/stat; }
# steal_pct prints the steal share between two cpu_ticks outputs.
steal_pct() { echo "$1 $2" | awk '{d=$3-$1; printf "%.0f", (d > 0 ? 100 * ($4 - $2) / d : 0)}'; }

ycsb=("$bin" ycsb --records "$records" --cache "$cache" --data "$data" --threads "$threads"
	--read-ratio 1 --zipf 0 --duration "${duration}s" --warmup "${warmup}s" --json)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -e "$data/scalestore.db" ]; then
	echo "loading $records records into $data (once)..." >&2
	"${ycsb[@]}" --duration 1s --warmup 0s >/dev/null 2>"$log" || { cat "$log" >&2; exit 1; }
fi
if [ "$diskwarmup" -gt 0 ]; then
	echo "warming the disk up: ${diskwarmup}s of ycsb, then of fio (not counted)..." >&2
	"${ycsb[@]}" --skip-load --duration "${diskwarmup}s" --warmup 0s >/dev/null 2>"$log" || { cat "$log" >&2; exit 1; }
	size=$(sed -n 's/.* --size=\([0-9]*\) .*/\1/p' "$log")
	if [ -n "$size" ]; then
		fio --name=warm --filename="$data/scalestore.db" --readonly --offset=4096 --size="$size" \
			--rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 \
			--runtime="$diskwarmup" --time_based --minimal >/dev/null
	fi
fi
printf '%-5s %12s %10s %7s %10s %7s\n' pair "ycsb ops/s" "fio IOPS" ratio "SSD rd/s" steal
sum_ops=0 sum_iops=0
for i in $(seq 1 "$pairs"); do
	t0=$(cpu_ticks)
	json=$("${ycsb[@]}" --skip-load 2>"$log" | grep '^{') || { cat "$log" >&2; exit 1; }
	t1=$(cpu_ticks)
	ops=$(echo "$json" | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*/\1/p')
	reads=$(echo "$json" | sed -n 's/.*"ssd_reads_per_sec":\([0-9.]*\).*/\1/p')
	# ycsb prints the fio command for the region the store wrote.
	size=$(sed -n 's/.* --size=\([0-9]*\) .*/\1/p' "$log")
	[ -n "$size" ] || { echo "ssd-vs-fio: ycsb printed no fio baseline" >&2; cat "$log" >&2; exit 1; }
	iops=$(fio --name=rr --filename="$data/scalestore.db" --readonly --offset=4096 --size="$size" \
		--rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 \
		--runtime="$duration" --time_based --minimal | awk -F';' '{print $8}')
	t2=$(cpu_ticks)
	ratio=$(awk -v a="$ops" -v b="$iops" 'BEGIN {printf "%.2f", a/b}')
	printf '%-5s %12.0f %10.0f %7s %10.0f %3s/%-3s\n' "$i" "$ops" "$iops" "$ratio" "$reads" \
		"$(steal_pct "$t0" "$t1")%" "$(steal_pct "$t1" "$t2")%"
	sum_ops=$(awk -v a="$sum_ops" -v b="$ops" 'BEGIN {print a+b}')
	sum_iops=$(awk -v a="$sum_iops" -v b="$iops" 'BEGIN {print a+b}')
done
awk -v a="$sum_ops" -v b="$sum_iops" -v n="$pairs" 'BEGIN {
	printf "overall: %.0f ops/s against %.0f IOPS, %.2fx (target >= 0.80x)\n", a/n, b/n, a/b }'
echo "steal: the host's share of this VM's CPU time during the ycsb run / the fio run" >&2
