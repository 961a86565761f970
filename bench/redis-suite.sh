#!/usr/bin/env bash
# Redis's own test suite as a yardstick (issue 49): runs units of the
# redis repository's tests/ in external mode against redis-server, one
# scalestore node, and a 3-node scalestore cluster (through node 0), and
# prints the tests each passes, per unit, side by side, then the tests
# redis-server passes and a scalestore target does not.
#
#   bench/redis-suite.sh [--units "unit/type/incr unit/expire"] [--targets "redis-all redis node cluster"]
#                        [--expect bench/redis-suite.pass]
#
# With --expect, every test the file lists (a unit, a tab, the test's
# name) for the units run must pass on every scalestore target, else the
# script names the ones that did not and exits 1: CI's check that what
# passes keeps passing (make redis-suite-ci).
#
# It fetches the tests itself (git clone --depth 1 of REDIS_TAG into
# bench-data/redis-$REDIS_TAG; REDIS_SRC may name a checkout or a git
# directory to take them from instead) and installs tcl with apt-get if
# tclsh is missing. Each unit runs with --durable (a test that errors is
# counted as failed and the unit goes on) and --singledb.
set -euo pipefail

REDIS_TAG=${REDIS_TAG:-7.0.15}
UNITS=${UNITS:-"unit/type/string unit/type/incr unit/keyspace unit/expire unit/multi unit/protocol unit/scan unit/info-command unit/quit"}
TARGETS=${TARGETS:-"redis-all redis node cluster"}
# Tests tagged with these are of things out of scope (DEBUG, replication,
# SAVE and the persistence commands, CONFIG SET maxmemory): they are
# skipped on every target but redis-all, which runs everything, for the
# baseline. (One that fails inside MULTI leaves its client in MULTI, and
# every test after it in the unit fails with it.)
SKIP_TAGS=${SKIP_TAGS:-"needs:debug needs:repl needs:save needs:config-maxmemory"}
PORT_BASE=${REDIS_SUITE_PORT:-27100}
# Where the test server and the redis servers it would spawn listen: away
# from runtest's default (21079 and up), which another run on the host
# may hold.
TEST_BASEPORT=${REDIS_SUITE_BASEPORT:-$((PORT_BASE + 200))}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin/scalestore}
OUT=${REDIS_SUITE_OUT:-$ROOT/bench-data/redis-suite}
EXPECT=""

while [ $# -gt 0 ]; do
	case $1 in
	--units) UNITS=$2; shift 2 ;;
	--targets) TARGETS=$2; shift 2 ;;
	--expect) EXPECT=$2; shift 2 ;;
	-h | --help) sed -n '2,21p' "$0"; exit 0 ;;
	*) echo "redis-suite: unknown argument $1" >&2; exit 2 ;;
	esac
done

# tcl, which the suite is written in.
if ! command -v tclsh >/dev/null; then
	echo "redis-suite: installing tcl" >&2
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq && $SUDO apt-get install -y -qq tcl >/dev/null
fi

# The tests of REDIS_TAG.
SUITE=$ROOT/bench-data/redis-$REDIS_TAG
if [ ! -x "$SUITE/runtest" ]; then
	mkdir -p "$SUITE"
	if [ -n "${REDIS_SRC:-}" ]; then
		git -C "$REDIS_SRC" archive "$REDIS_TAG" runtest tests | tar -x -C "$SUITE"
	else
		rm -rf "$SUITE"
		git clone -q --depth 1 --branch "$REDIS_TAG" https://github.com/redis/redis "$SUITE"
	fi
fi

mkdir -p "$OUT"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

wait_ping() { # port (bash's /dev/tcp: no redis-cli needed)
	for _ in $(seq 1 100); do
		if exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null; then
			printf 'PING\r\n' >&3
			line=""
			read -r -t 2 line <&3 || true
			exec 3>&-
			if [ "${line%$'\r'}" = "+PONG" ]; then return 0; fi
		fi
		sleep 0.1
	done
	echo "redis-suite: nothing answers PING on port $1" >&2
	return 1
}

# start_target name: starts it, sets PORT to where it serves RESP.
start_target() {
	case $1 in
	redis | redis-all)
		PORT=$PORT_BASE
		redis-server --port "$PORT" --save '' --appendonly no --enable-debug-command yes \
			--dir "$OUT" >"$OUT/redis-server.log" 2>&1 &
		pids+=($!)
		;;
	node)
		PORT=$((PORT_BASE + 1))
		"$BIN" node --id 0 --peers "0=127.0.0.1:$((PORT_BASE + 2))" --resp "127.0.0.1:$PORT" \
			--shutdown-timeout 5s >"$OUT/node.log" 2>&1 &
		pids+=($!)
		;;
	cluster)
		PORT=$((PORT_BASE + 3))
		peers="0=127.0.0.1:$((PORT_BASE + 4)),1=127.0.0.1:$((PORT_BASE + 5)),2=127.0.0.1:$((PORT_BASE + 6))"
		for id in 2 1 0; do
			resp=""
			[ "$id" = 0 ] && resp="--resp 127.0.0.1:$PORT"
			# shellcheck disable=SC2086
			"$BIN" node --id "$id" --peers "$peers" $resp --shutdown-timeout 5s >"$OUT/cluster-$id.log" 2>&1 &
			pids+=($!)
		done
		;;
	*) echo "redis-suite: unknown target $1" >&2; exit 2 ;;
	esac
	wait_ping "$PORT"
}

# Without redis-server there is no baseline: its targets are left out.
if ! command -v redis-server >/dev/null; then
	echo "redis-suite: redis-server is not installed (apt-get install redis-server): no baseline" >&2
	TARGETS=$(tr ' ' '\n' <<<"$TARGETS" | grep -v '^redis' | tr '\n' ' ')
fi

declare -A ok
for target in $TARGETS; do
	start_target "$target"
	for unit in $UNITS; do
		log="$OUT/$target-${unit//\//_}.log"
		tags=()
		if [ "$target" != redis-all ]; then
			for t in $SKIP_TAGS; do tags+=(--tags "-$t"); done
		fi
		(cd "$SUITE" && ./runtest --host 127.0.0.1 --port "$PORT" --singledb --durable --clients 1 \
			--baseport "$TEST_BASEPORT" --timeout 120 "${tags[@]}" --single "$unit") >"$log" 2>&1 || true
		sed 's/\x1b\[[0-9;]*m//g' "$log" | sed -n 's/^\[ok\]: \(.*\) ([0-9]* ms)$/\1/p' | sort >"$log.ok"
		ok[$target,$unit]=$(wc -l <"$log.ok")
	done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
done

printf '\nskipped tags (all but redis-all): %s\n' "$SKIP_TAGS"
printf '\n%-22s' unit
for target in $TARGETS; do printf '%10s' "$target"; done
printf '\n'
for unit in $UNITS; do
	printf '%-22s' "$unit"
	for target in $TARGETS; do printf '%10s' "${ok[$target,$unit]}"; done
	printf '\n'
done
printf '%-22s' total
for target in $TARGETS; do
	t=0
	for unit in $UNITS; do t=$((t + ${ok[$target,$unit]})); done
	printf '%10s' "$t"
done
printf '\n'

# What redis-server passes and scalestore does not, per target and unit.
if [[ " $TARGETS " == *" redis "* ]]; then
	for target in $TARGETS; do
		[ "$target" = redis ] || [ "$target" = redis-all ] && continue
		for unit in $UNITS; do
			r="$OUT/redis-${unit//\//_}.log.ok"
			s="$OUT/$target-${unit//\//_}.log.ok"
			missing=$(comm -23 "$r" "$s")
			if [ -n "$missing" ]; then
				printf '\n%s, %s: passed by redis-server, not here:\n' "$target" "$unit"
				sed 's/^/  - /' <<<"$missing"
			fi
		done
	done
fi
printf '\nlogs: %s\n' "$OUT"

# The tests that must pass (--expect).
if [ -n "$EXPECT" ]; then
	failed=0
	for target in $TARGETS; do
		[[ "$target" == redis* ]] && continue
		for unit in $UNITS; do
			s="$OUT/$target-${unit//\//_}.log.ok"
			missing=$(awk -F'\t' -v u="$unit" '$1 == u { print $2 }' "$EXPECT" | sort | comm -23 - "$s")
			if [ -n "$missing" ]; then
				printf '\n%s, %s: expected to pass (%s), did not:\n' "$target" "$unit" "$EXPECT"
				sed 's/^/  - /' <<<"$missing"
				failed=1
			fi
		done
	done
	if [ "$failed" = 1 ]; then
		exit 1
	fi
	printf '\nevery test %s lists for these units passed on %s\n' "$EXPECT" "$TARGETS"
fi
