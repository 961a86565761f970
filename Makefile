# ScaleStore-Go. Two set-up commands for a newcomer: `make run` and `make test`.
GO      ?= go
BIN     := bin/scalestore
PKGS    := ./...

.PHONY: all build run test test-short bench bench-peers bench-ssd redis-suite redis-suite-ci lint fuzz swarm cover-swarm mutants crashtest crashtest-cluster clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/scalestore

# The main job on an embedded default: a 3-node cluster on this host over
# shared memory (three node processes), YCSB 95/5 zipf 0.99 for 10 s with a
# progress line, then porcupine's check of the whole history.
run: build
	$(BIN) cluster --auto-shape --transport shm --records 100000 --read-ratio 0.95 --zipf 0.99 \
		--duration 10s --check

# All tests: unit tests, scenario golden files, the simulator swarm and the
# mutation checks (bounded so the suite stays well under 15 minutes on 2 cores).
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 12m $(PKGS)
	$(GO) test -count=1 -short -tags invariants ./scenarios/...
	@if pkg-config --exists libibverbs 2>/dev/null || test -f /usr/include/infiniband/verbs.h; then $(GO) test -count=1 -tags ibverbs ./transport/ibverbs/... && $(GO) test -count=1 -tags ibverbs -run 'IBVerbs|TransportTable|Ibverbs' . ./cmd/scalestore; else echo "skip: libibverbs-dev not installed (the ibverbs-tagged tests of transport/ibverbs, Join and the entry points)"; fi
	$(GO) test -count=1 -short -race ./bufmgr ./btree .

test-short:
	$(GO) test -count=1 -short $(PKGS)

# Benchmarks print figures; they never fail on speed.
bench: build
	$(BIN) sim --seed 1 --nodes 4 --workers 3 --pages 64 --cache-pages 16 --ops 200000 --faults none --json --quiet

# ScaleStore next to tidwall/btree and cockroachdb/pebble on YCSB c, b and a
# at 1 and 2 threads (about two minutes). Pebble lives in bench/'s own
# go.mod so it never reaches the main module; docs/bench.md has the results.
bench-peers:
	cd bench && $(GO) run ./cmd/ycsbpeers --records 1000000 --threads 1,2 --mixes c,b,a --duration 3s --warmup 1s

# Out of memory against the disk (issue 3's target): scalestore ycsb, 8M
# records and a 256 MiB cache, alternating with fio's random reads of the
# same store file; about 25 s a pair after a one-time 20 s load into
# bench-data/ssd (4.1 GB sparse, 1.3 GB written). Needs fio.
PAIRS ?= 3
bench-ssd: build
	bench/ssd-vs-fio.sh --pairs $(PAIRS)

# Redis's own test suite (issue 49): the units of tests/ of redis 7.0.15
# in external mode against redis-server, one node and a 3-node cluster,
# per-unit pass counts side by side (fetches the tests and installs tcl
# itself; about 10 minutes). UNITS="unit/type/incr" narrows it.
redis-suite: build
	UNITS="$(UNITS)" bench/redis-suite.sh

# CI's run of the suite (.ci/run): every unit above against one node and a
# 3-node cluster, no baseline, and every test bench/redis-suite.pass lists
# must pass (about two minutes; docs/redis-suite.md).
redis-suite-ci: build
	bench/redis-suite.sh --targets "node cluster" --expect bench/redis-suite.pass

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 $(PKGS)
	bash -n bench/ssd-vs-fio.sh bench/ab.sh bench/redis-suite.sh

# Coverage-guided fuzzing of the decoders (runs until interrupted per target
# for FUZZTIME, default 30s each).
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzDecodeEvictEntries$$' -fuzztime $(FUZZTIME)
	$(GO) test ./index/nam -run '^$$' -fuzz '^FuzzServerHandle$$' -fuzztime $(FUZZTIME)
	$(GO) test ./index/cell -run '^$$' -fuzz '^FuzzServerHandle$$' -fuzztime $(FUZZTIME)
	$(GO) test ./examples/msi -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)

# The long swarm of the acceptance criteria: 300 seeds under heavy faults,
# and 1,500 of the wide shape (more workers than lines of cache: issue 36).
# SEED moves every run's first seed (a nightly swarm asks for fresh ones).
SEED ?= 1
swarm: build
	$(BIN) sim --seed $(SEED) --seeds 300 --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --protocol selcc --seed $(SEED) --seeds 300 --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --protocol selcc --workload rmw --seed $(SEED) --seeds 300 --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --protocol selcc --workload btree --seed $(SEED) --seeds 300 --nodes 4 --workers 3 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --seed $(SEED) --seeds 300 --crashes 3 --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --seed $(SEED) --seeds 300 --crashes 3 --workload rmw --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --seed $(SEED) --seeds 300 --crashes 3 --workload btree --nodes 4 --workers 3 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --seed $(SEED) --seeds 300 --crashes 3 --workload btree --keys 20000 --nodes 4 --workers 3 --cache-pages 12 --ops 2000 \
		--read-ratio 0.6 --zipf 0.9 --faults heavy --json
	$(BIN) sim --seed $(SEED) --seeds 1500 --nodes 8 --workers 4 --pages 24 --cache-pages 6 --ops 3000 \
		--read-ratio 0.5 --zipf 0.99 --faults heavy --json
	$(BIN) sim --protocol selcc --seed $(SEED) --seeds 1500 --nodes 8 --workers 4 --pages 24 --cache-pages 6 --ops 3000 \
		--read-ratio 0.5 --zipf 0.99 --faults heavy --json
	$(BIN) sim --protocol selcc --workload rmw --seed $(SEED) --seeds 1500 --nodes 8 --workers 4 --pages 24 --cache-pages 6 --ops 3000 \
		--read-ratio 0.5 --zipf 0.99 --faults heavy --json
	@for w in nam-cg nam-fg nam-hybrid cell; do \
		$(BIN) sim --workload $$w --seed $(SEED) --seeds 300 --keys 200 --ops 2000 --faults heavy --json || exit 1; done
	$(BIN) sim --workload cell --seed $(SEED) --seeds 300 --keys 200 --ops 2000 --faults heavy --cell-mega-nodes 12 --json
	@$(BIN) protocols --list runs | while read p w; do \
		$(BIN) sim --protocol $$p --workload $$w --seed $(SEED) --seeds 300 --faults heavy --json || exit 1; done

# Writers killed with SIGKILL at random moments: every reopen must find all
# acknowledged writes or refuse the store (about a minute for 300 rounds;
# make test runs 12 in cmd/scalestore's TestCrashtestRounds).
ROUNDS ?= 300
crashtest: build
	$(BIN) crashtest --data $${TMPDIR:-/tmp}/scalestore-crashtest --rounds $(ROUNDS)

# Node processes killed (kill -9), paused (SIGSTOP) and partitioned while
# Redis clients write, over tcp and shm; the others go on without them
# (membership on an embedded etcd); every round's history checked with
# porcupine (make test runs 4 rounds in TestCrashtestCluster).
CLUSTER_ROUNDS ?= 30
crashtest-cluster: build
	$(BIN) crashtest --cluster --data $${TMPDIR:-/tmp}/scalestore-crashtest-cluster --rounds $(CLUSTER_ROUNDS)

# Which code of the protocols the swarm reaches: a -cover build of the
# simulator runs the swarm's configurations (COVER_SEEDS seeds each) and
# prints the coverage of every function of protocol/, protocol/selcc,
# linecache and the actors (the message handlers), then each block of
# protocol/ and linecache that no run reached (docs/protocol.md,
# "Coverage").
COVER_SEEDS ?= 60
COVER_DIR ?= $${TMPDIR:-/tmp}/scalestore-cover-swarm
MOD = github.com/scalestore-go/scalestore
COVER_PKGS = $(MOD)/protocol,$(MOD)/protocol/selcc,$(MOD)/linecache,$(MOD)/actors
cover-swarm:
	@rm -rf $(COVER_DIR) && mkdir -p $(COVER_DIR)/data
	@# The main package is instrumented too: a binary whose main is not writes no coverage.
	go build -cover -coverpkg=$(COVER_PKGS),$(MOD)/cmd/scalestore -o $(COVER_DIR)/scalestore ./cmd/scalestore
	@set -e; run() { GOCOVERDIR=$(COVER_DIR)/data $(COVER_DIR)/scalestore sim --seeds $(COVER_SEEDS) --faults heavy "$$@" > /dev/null; }; \
	run --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9; \
	run --workload rmw --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9; \
	run --workload btree --nodes 4 --workers 3 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9; \
	run --crashes 3 --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9; \
	run --crashes 3 --workload btree --nodes 4 --workers 3 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9; \
	run --nodes 8 --workers 4 --pages 24 --cache-pages 6 --ops 3000 --read-ratio 0.5 --zipf 0.99; \
	run --compute-nodes 2 --nodes 2 --workers 2 --pages 32 --cache-pages 8 --ops 2000; \
	for p in fifo polling; do run --protocol $$p --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000; done; \
	for w in register rmw; do run --protocol selcc --workload $$w --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9; done; \
	run --protocol selcc --workload btree --nodes 4 --workers 3 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9
	@go tool covdata textfmt -i $(COVER_DIR)/data -pkg $(COVER_PKGS) -o $(COVER_DIR)/cover.out
	@go tool cover -func $(COVER_DIR)/cover.out | sed 's#$(MOD)/##'
	@echo; go tool covdata percent -i $(COVER_DIR)/data -pkg $(COVER_PKGS) | sed 's#$(MOD)/##'
	@echo; echo "blocks of protocol/ and linecache/ that no run reached (file:lines statements):"
	@awk 'NR > 1 && $$3 == 0 && ($$1 ~ /scalestore\/protocol\// || $$1 ~ /scalestore\/linecache\//) && $$1 !~ /_test/ { split($$1, a, ":"); split(a[2], r, ","); split(r[1], b, "."); split(r[2], e, "."); print a[1] ":" b[1] "-" e[1], $$2 }' $(COVER_DIR)/cover.out | sed 's#github.com/scalestore-go/scalestore/##' | sort -t: -k1,1 -k2,2n | uniq

# Every mutation must be caught within 200 seeds.
mutants: build
	@for mw in skip-invalidation:register no-owner-stability:register drop-dirty:register stale-grant:register \
		skip-version-check:register upgrade-ignores-version:rmw entitle-fewer:register forget-owner-sharer:register conflict-keeps-epoch:register \
		encode-drops-pred:register crash-no-write-through:crash crash-keep-dead-pages:crash \
		crash-resurrect-evicting:crash crash-keep-messages:crash crash-btree-split-node-first:crashbtree \
		replica-ack-before-backup:replica replica-promote-unfenced:replica replica-copy-unlatched:replica \
		replica-return-stale:replica \
		selcc-skip-undo:selcc selcc-handover-without-faa:selcc \
		selcc-share-without-flush:selcc selcc-release-keeps-copy:selcc selcc-evict-without-flush:selcc \
		selcc-round-restarts:selcc; \
		do m=$${mw%%:*}; w=$${mw#*:}; p=chaining; c=0; if [ $$w = selcc ]; then w=register; p=selcc; fi; \
		f=12; k=1000; r=1; if [ $$w = crash ]; then w=register; c=10; f=8; fi; \
		if [ $$w = replica ]; then w=register; c=10; f=8; r=2; fi; \
		if [ $$w = crashbtree ]; then w=btree; c=10; f=8; k=20000; fi; \
		$(BIN) sim --seeds 200 --protocol $$p --workload $$w --keys $$k --crashes $$c --replicas $$r --nodes 4 --workers 3 --pages 48 --cache-pages $$f --ops 2000 \
			--read-ratio 0.6 --zipf 0.9 --faults heavy --mutate $$m --json --quiet --viz-dir /tmp 2>/dev/null \
			| tail -1 | grep -q '"violations":1' && echo "caught $$m ($$p, $$w)" || { echo "MISSED $$m ($$p, $$w)"; exit 1; }; \
	done
	@for mw in nam-unlocked-write:nam-fg nam-unlocked-write:nam-hybrid nam-no-move-right:nam-fg nam-no-move-right:nam-hybrid \
		nam-reply-before-apply:nam-cg nam-scan-skips-next:nam-cg nam-locate-next-leaf:nam-hybrid nam-trust-head:nam-fg nam-trust-head:nam-hybrid \
		cell-no-move-right:cell cell-cache-leaves:cell cell-stale-hint:cell cell-split-writes-right:cell cell-split-early-unlock:cell \
		cell-split-no-invalidate:cell cell-no-low-check:cell; \
		do m=$${mw%%:*}; w=$${mw#*:}; mega=0; [ $$w = cell ] && mega=12; \
		$(BIN) sim --seeds 200 --workload $$w --keys 200 --ops 2000 --faults heavy --cell-mega-nodes $$mega --mutate $$m --json --quiet --viz-dir /tmp 2>/dev/null \
			| tail -1 | grep -q '"violations":1' && echo "caught $$m ($$w)" || { echo "MISSED $$m ($$w)"; exit 1; }; \
	done
	@$(BIN) protocols --list mutants | while read p m w; do \
		$(BIN) sim --protocol $$p --workload $$w --seeds 200 --faults heavy --mutate $$m --json --quiet --viz-dir /tmp 2>/dev/null \
			| tail -1 | grep -q '"violations":1' && echo "caught $$m ($$p, $$w)" || { echo "MISSED $$m ($$p, $$w)"; exit 1; }; \
	done

clean:
	rm -rf bin
