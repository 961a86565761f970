#!/usr/bin/env bash
# Redis's own test suite as a yardstick (issue 49): runs units of the
# redis repository's tests/ in external mode against redis-server, one
# scalestore node, and a 3-node scalestore cluster (through node 0), and
# prints the tests each passes, per unit, side by side, then the tests
# redis-server passes and a scalestore target does not.
#
#   bench/redis-suite.sh [--units "unit/type/incr unit/expire"] [--targets "redis-all redis node cluster"]
#   bench/redis-suite.sh --check [--list FILE] [--targets "node cluster"]
#   bench/redis-suite.sh --update-list [--list FILE]
#
# --check (CI: make redis-suite-check) runs the units against the
# scalestore targets only and compares with the list of tests that pass
# (bench/redis-suite-pass.txt, lines "unit<TAB>test name"): it names every
# listed test that did not pass on a target and exits 1 if there is one;
# it also names the tests that pass and are not listed yet. --update-list
# rewrites the list from a run: the tests that pass on every target.
#
# It fetches the tests of REDIS_TAG itself, into bench-data/redis-$REDIS_TAG:
# from REDIS_SRC if set (a checkout or git directory), else from Debian's
# source package of redis (apt-get source into a private apt state; its
# upstream tarball's sha256 is pinned), else with git clone; it fails if
# none works. It installs tcl with apt-get if tclsh is missing. Each unit
# runs with --durable (a test that errors is counted as failed and the
# unit goes on) and --singledb.
set -euo pipefail

REDIS_TAG=${REDIS_TAG:-7.0.15}
# The upstream tarball in Debian's source package of redis 7.0.15.
REDIS_ORIG_SHA256=${REDIS_ORIG_SHA256:-4b1dc4ee6d622a09fff9c6777191209750fb5e5a725ef78ea012d6eef4c22982}
UNITS=${UNITS:-"unit/type/string unit/type/incr unit/keyspace unit/expire unit/multi unit/protocol unit/scan unit/info-command unit/quit"}
TARGETS=${TARGETS:-}
# Tests tagged with these are of things out of scope (DEBUG, replication,
# SAVE and the persistence commands, CONFIG SET maxmemory): they are
# skipped on every target but redis-all, which runs everything, for the
# baseline. (One that fails inside MULTI leaves its client in MULTI, and
# every test after it in the unit fails with it.)
SKIP_TAGS=${SKIP_TAGS:-"needs:debug needs:repl needs:save needs:config-maxmemory"}
# The first of the 7 ports the targets use; unset, the script picks 7 free
# ones (the machine may be shared with other servers).
PORT_BASE=${REDIS_SUITE_PORT:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin/scalestore}
OUT=${REDIS_SUITE_OUT:-$ROOT/bench-data/redis-suite}
LIST=$ROOT/bench/redis-suite-pass.txt
MODE=compare

while [ $# -gt 0 ]; do
	case $1 in
	--units) UNITS=$2; shift 2 ;;
	--targets) TARGETS=$2; shift 2 ;;
	--check) MODE=check; shift ;;
	--update-list) MODE=update; shift ;;
	--list) LIST=$2; shift 2 ;;
	-h | --help) sed -n '2,25p' "$0"; exit 0 ;;
	*) echo "redis-suite: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -z "$TARGETS" ]; then
	if [ "$MODE" = compare ]; then TARGETS="redis-all redis node cluster"; else TARGETS="node cluster"; fi
fi
if [ "$MODE" != compare ] && [[ " $TARGETS " == *" redis"* ]]; then
	echo "redis-suite: --check and --update-list take scalestore targets only (node, cluster)" >&2
	exit 2
fi
if [ "$MODE" = check ] && [ ! -f "$LIST" ]; then
	echo "redis-suite: no list of passing tests at $LIST" >&2
	exit 2
fi
if [ "$MODE" != compare ] && [ ! -x "$BIN" ]; then
	echo "redis-suite: no scalestore binary at $BIN (make build)" >&2
	exit 2
fi

# tcl, which the suite is written in.
if ! command -v tclsh >/dev/null; then
	echo "redis-suite: installing tcl" >&2
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq && $SUDO apt-get install -y -qq tcl >/dev/null
	command -v tclsh >/dev/null || { echo "redis-suite: tcl could not be installed" >&2; exit 1; }
fi

# fetch_from_debian dir: runtest and tests/ of Debian's source package of
# redis, whose upstream tarball must be REDIS_TAG's (pinned sha256). The
# source indexes come from the machine's own Debian sources (each deb entry
# read as a deb-src one) into a private apt state (bench-data/apt-src):
# the machine's sources and lists are left as they are.
fetch_from_debian() {
	command -v apt-get >/dev/null || return 1
	local d=$ROOT/bench-data/apt-src f
	rm -rf "$d" && mkdir -p "$d/parts" "$d/lists/partial" "$d/cache/archives/partial" "$d/src"
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && sed -n 's/^[[:space:]]*deb\([[:space:]]\)/deb-src\1/p' "$f" >"$d/parts/$(basename "$f" .list).list"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$d/parts/$(basename "$f")"
	done
	local opts=(-o "Dir::Etc::SourceList=$d/none.list" -o "Dir::Etc::SourceParts=$d/parts"
		-o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d/cache"
		-o "APT::Sandbox::User=$(id -un)" -o Acquire::http::Timeout=30 -o Acquire::Retries=2)
	# A source without a deb-src side fails its part of the update; apt-get
	# source below says whether redis's was found.
	apt-get "${opts[@]}" -qq update >&2 || true
	(cd "$d/src" && apt-get "${opts[@]}" -qq source --download-only redis >&2) || return 1
	local orig=$d/src/redis_$REDIS_TAG.orig.tar.gz
	if [ ! -f "$orig" ]; then
		echo "redis-suite: Debian's source package of redis is not $REDIS_TAG: $(cd "$d/src" && echo *)" >&2
		return 1
	fi
	if [ "$(sha256sum "$orig" | cut -d' ' -f1)" != "$REDIS_ORIG_SHA256" ]; then
		echo "redis-suite: $orig does not have the pinned sha256 $REDIS_ORIG_SHA256" >&2
		return 1
	fi
	mkdir -p "$1"
	tar -xzf "$orig" -C "$1" --strip-components=1 "redis-$REDIS_TAG/runtest" "redis-$REDIS_TAG/tests"
	rm -rf "$d"
}

# The tests of REDIS_TAG.
SUITE=$ROOT/bench-data/redis-$REDIS_TAG
if [ ! -x "$SUITE/runtest" ]; then
	rm -rf "$SUITE"
	mkdir -p "$ROOT/bench-data"
	if [ -n "${REDIS_SRC:-}" ]; then
		mkdir -p "$SUITE"
		if [ -x "$REDIS_SRC/runtest" ] && [ -d "$REDIS_SRC/tests" ]; then
			cp -r "$REDIS_SRC/runtest" "$REDIS_SRC/tests" "$SUITE/"
		else
			git -C "$REDIS_SRC" archive "$REDIS_TAG" runtest tests | tar -x -C "$SUITE"
		fi
	elif fetch_from_debian "$SUITE"; then
		echo "redis-suite: tests of redis $REDIS_TAG from Debian's source package" >&2
	else
		rm -rf "$SUITE"
		echo "redis-suite: Debian's source package failed; trying git clone of redis $REDIS_TAG" >&2
		git clone -q --depth 1 --branch "$REDIS_TAG" https://github.com/redis/redis "$SUITE" || true
	fi
	if [ ! -x "$SUITE/runtest" ]; then
		rm -rf "$SUITE"
		echo "redis-suite: could not fetch the tests of redis $REDIS_TAG (Debian's source package, git clone); set REDIS_SRC to a checkout" >&2
		exit 1
	fi
fi

mkdir -p "$OUT"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

# listening port: whether something accepts connections on it.
listening() {
	# (the group: a bare exec 2>/dev/null would silence the script from here on)
	if { exec 4<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null; then exec 4>&-; return 0; fi
	return 1
}

# Seven free ports below the kernel's ephemeral range, unless
# REDIS_SUITE_PORT names the first.
if [ -z "$PORT_BASE" ]; then
	for _ in $(seq 1 50); do
		base=$((20000 + RANDOM % 1200 * 10))
		busy=0
		for p in $(seq "$base" $((base + 6))); do listening "$p" && busy=1 && break; done
		[ $busy = 0 ] && PORT_BASE=$base && break
	done
	[ -n "$PORT_BASE" ] || { echo "redis-suite: found no 7 free ports" >&2; exit 1; }
fi

wait_ping() { # port (bash's /dev/tcp: no redis-cli needed)
	for _ in $(seq 1 100); do
		# A target that exited (a port taken, say) will not answer.
		for p in "${pids[@]}"; do
			if ! kill -0 "$p" 2>/dev/null; then
				echo "redis-suite: a process of the target exited before serving:" >&2
				for l in "${tlogs[@]}"; do
					[ -f "$l" ] && tail -n 2 "$l" | sed "s|^|  ${l##*/}: |" >&2
				done
				return 1
			fi
		done
		# (the group: a bare exec 2>/dev/null would silence the script from here on)
		if { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null; then
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
	tlogs=()
	case $1 in
	redis | redis-all)
		PORT=$PORT_BASE
		tlogs=("$OUT/redis-server.log")
		redis-server --port "$PORT" --save '' --appendonly no --enable-debug-command yes \
			--dir "$OUT" >"$OUT/redis-server.log" 2>&1 &
		pids+=($!)
		;;
	node)
		PORT=$((PORT_BASE + 1))
		tlogs=("$OUT/node.log")
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
			tlogs+=("$OUT/cluster-$id.log")
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

declare -A ok secs
for target in $TARGETS; do
	start_target "$target"
	for unit in $UNITS; do
		log="$OUT/$target-${unit//\//_}.log"
		tags=()
		if [ "$target" != redis-all ]; then
			for t in $SKIP_TAGS; do tags+=(--tags "-$t"); done
		fi
		start=$SECONDS
		(cd "$SUITE" && ./runtest --host 127.0.0.1 --port "$PORT" --singledb --durable --clients 1 \
			--timeout 120 "${tags[@]}" --single "$unit") >"$log" 2>&1 || true
		secs[$target,$unit]=$((SECONDS - start))
		# "unit<TAB>test name" of every test that passed, sorted (a name
		# can repeat within a unit: the lists are compared as multisets).
		sed 's/\x1b\[[0-9;]*m//g' "$log" | sed -n 's/^\[ok\]: \(.*\) ([0-9]* ms)$/\1/p' |
			sed "s|^|$unit\t|" | LC_ALL=C sort >"$log.ok"
		ok[$target,$unit]=$(wc -l <"$log.ok")
	done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
done

printf '\nskipped tags (all but redis-all): %s\n' "$SKIP_TAGS"
printf '\ntests passed (seconds the unit took)\n%-22s' unit
for target in $TARGETS; do printf '%14s' "$target"; done
printf '\n'
for unit in $UNITS; do
	printf '%-22s' "$unit"
	for target in $TARGETS; do printf '%14s' "${ok[$target,$unit]} (${secs[$target,$unit]}s)"; done
	printf '\n'
done
printf '%-22s' total
for target in $TARGETS; do
	t=0 s=0
	for unit in $UNITS; do t=$((t + ${ok[$target,$unit]})) s=$((s + ${secs[$target,$unit]})); done
	printf '%14s' "$t (${s}s)"
done
printf '\n'

# passed target: every test the target passed in UNITS, sorted.
passed() {
	for unit in $UNITS; do cat "$OUT/$1-${unit//\//_}.log.ok"; done | LC_ALL=C sort
}

case $MODE in
compare)
	# What redis-server passes and scalestore does not, per target and unit.
	if [[ " $TARGETS " == *" redis "* ]]; then
		for target in $TARGETS; do
			[ "$target" = redis ] || [ "$target" = redis-all ] && continue
			for unit in $UNITS; do
				r="$OUT/redis-${unit//\//_}.log.ok"
				s="$OUT/$target-${unit//\//_}.log.ok"
				missing=$(LC_ALL=C comm -23 "$r" "$s" | cut -f2-)
				if [ -n "$missing" ]; then
					printf '\n%s, %s: passed by redis-server, not here:\n' "$target" "$unit"
					sed 's/^/  - /' <<<"$missing"
				fi
			done
		done
	fi
	printf '\nlogs: %s\n' "$OUT"
	;;
update)
	# The tests that pass on every target, in UNITS; the list's lines of
	# other units are kept.
	common=$(mktemp)
	first=1
	for target in $TARGETS; do
		if [ $first = 1 ]; then passed "$target" >"$common"; first=0
		else LC_ALL=C comm -12 "$common" <(passed "$target") >"$common.next"; mv "$common.next" "$common"; fi
	done
	{
		printf '# Tests of redis %s that pass against scalestore on every target of\n' "$REDIS_TAG"
		printf '# make redis-suite-check (one node; a 3-node cluster through node 0):\n'
		printf '# "unit<TAB>test name". Written by bench/redis-suite.sh --update-list.\n'
		{
			if [ -f "$LIST" ]; then
				{ grep -v '^#' "$LIST" || true; } | awk -F'\t' -v units=" $UNITS " 'index(units, " " $1 " ") == 0'
			fi
			cat "$common"
		} | LC_ALL=C sort
	} >"$LIST.new"
	mv "$LIST.new" "$LIST"
	rm -f "$common"
	printf '\n%s: %d tests\n' "$LIST" "$(grep -vc '^#' "$LIST")"
	;;
check)
	want=$(mktemp)
	{ grep -v '^#' "$LIST" || true; } | awk -F'\t' -v units=" $UNITS " 'index(units, " " $1 " ") > 0' | LC_ALL=C sort >"$want"
	npass=0 nfail=0
	for target in $TARGETS; do
		got=$(mktemp)
		passed "$target" >"$got"
		failed=$(LC_ALL=C comm -23 "$want" "$got")
		newly=$(LC_ALL=C comm -13 "$want" "$got")
		nf=0
		[ -n "$failed" ] && nf=$(wc -l <<<"$failed")
		npass=$((npass + $(wc -l <"$want") - nf)) nfail=$((nfail + nf))
		if [ -n "$failed" ]; then
			printf '\nFAILED on %s: %d listed tests did not pass (logs: %s/%s-*.log):\n' "$target" "$nf" "$OUT" "$target"
			sed 's/^/  - /; s/\t/: /' <<<"$failed"
		fi
		if [ -n "$newly" ]; then
			printf '\n%s: passes and is not in %s yet (bench/redis-suite.sh --update-list adds it):\n' "$target" "${LIST#"$ROOT"/}"
			sed 's/^/  + /; s/\t/: /' <<<"$newly"
		fi
		rm -f "$got"
	done
	rm -f "$want"
	# A closing line CI's reader takes as the count of tests.
	printf '\nredis-suite: %d passed, %d failed\n' "$npass" "$nfail"
	[ "$nfail" = 0 ] || exit 1
	;;
esac
