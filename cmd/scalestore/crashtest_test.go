package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/storage/nvme"
)

// TestCrashtestRounds runs a few rounds of crashtest with writers killed
// by SIGKILL: every one is whole, and most recovered the store from its
// log.
func TestCrashtestRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills writer processes")
	}
	bin := filepath.Join(t.TempDir(), "scalestore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	code, out, errOut := runCLI("crashtest", "--data", t.TempDir(), "--rounds", "12", "--seed", "15", "--bin", bin, "--json")
	if code != 0 {
		t.Fatalf("crashtest: exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 13 {
		t.Fatalf("%d lines of JSON, want 12 rounds and a summary:\n%s", len(lines), out)
	}
	outcomes, recovered, replayed, deletes, shared := map[string]int{}, 0, 0, 0, 0
	for _, l := range lines[:12] {
		var c crashRound
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		outcomes[c.Outcome]++
		if c.Shared && c.HistoryOps > 0 {
			shared++
		}
		if c.Recovered {
			recovered++
			replayed += c.Replayed
		}
		deletes += c.Deleted
	}
	if shared == 0 {
		t.Fatalf("no shared-key round among the 12:\n%s", out)
	}
	if outcomes["whole"] != 12 || recovered < 6 || replayed == 0 || deletes == 0 {
		t.Fatalf("outcomes %v, %d rounds recovered (%d records replayed), %d deletes: want 12 whole rounds, "+
			"most of them recovered from the log, and deletes among the writes", outcomes, recovered, replayed, deletes)
	}
}

// TestCrashCheckFindsMissingWrites: the classification itself: a store
// that opens without an acknowledged write is silently short, one with all
// of them whole, one that was killed refused.
func TestCrashCheckFindsMissingWrites(t *testing.T) {
	dir := t.TempDir()
	db, err := scalestore.Open(dir, scalestore.Options{CachePages: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := db.Put([]byte(crashKey(i)), []byte(crashVal(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	acked := crashAcks{puts: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}
	c := crashRound{}
	if crashCheck(&c, dir, acked); c.Outcome != "whole" {
		t.Fatalf("all acknowledged writes there: %q %s", c.Outcome, c.Detail)
	}
	c = crashRound{}
	if crashCheck(&c, dir, crashAcks{puts: append(acked.puts, 10)}); c.Outcome != "short" || !strings.Contains(c.Detail, crashKey(10)) {
		t.Fatalf("write 10 acknowledged, not there: %q %s", c.Outcome, c.Detail)
	}
	c = crashRound{}
	if crashCheck(&c, dir, crashAcks{puts: acked.puts, deletes: []int{3}}); c.Outcome != "short" || !strings.Contains(c.Detail, "delete was acknowledged") {
		t.Fatalf("delete of key 3 acknowledged, key there: %q %s", c.Outcome, c.Detail)
	}
	c = crashRound{Old: true}
	if crashCheck(&c, dir, acked); c.Outcome != "short" || !strings.Contains(c.Detail, "clean session") {
		t.Fatalf("an old store without its clean session's keys: %q %s", c.Outcome, c.Detail)
	}
	// Killed (opened, the superblock marked in use, and left so) and its
	// log lost: refused, and read with OpenUnclean.
	s, err := nvme.Open(filepath.Join(dir, scalestore.StoreFile), nvme.Options{Journal: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Abandon()
	if err := os.Remove(filepath.Join(dir, scalestore.LogFile)); err != nil {
		t.Fatal(err)
	}
	c = crashRound{}
	if crashCheck(&c, dir, crashAcks{puts: append(acked.puts, 10)}); c.Outcome != "refused" || c.Salvaged != 10 {
		t.Fatalf("a killed store without its log: %q %s, %d keys salvaged", c.Outcome, c.Detail, c.Salvaged)
	}
}

// TestKilledNodeStoreIsRefused: a cluster node's store whose node did not
// close it is not formatted over without a word; --reformat discards it,
// and a store its node closed is formatted as every start does.
func TestKilledNodeStoreIsRefused(t *testing.T) {
	dir := t.TempDir()
	st, _, err := openNodeStore(dir, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WritePage(5, make([]byte, nvme.PageSize)); err != nil {
		t.Fatal(err)
	}
	st.(*nvme.Store).Abandon() // what a killed node leaves
	if _, _, err := openNodeStore(dir, 3, false); !errors.Is(err, errUncleanNodeStore) || !strings.Contains(err.Error(), "--reformat") {
		t.Fatalf("start on a killed node's store: %v, want errUncleanNodeStore and the way out", err)
	}
	if _, _, err := openNodeStore(dir, 3, false); !errors.Is(err, errUncleanNodeStore) {
		t.Fatalf("a refused start must leave the store unclean: %v", err)
	}
	_, closeStore, err := openNodeStore(dir, 3, true)
	if err != nil {
		t.Fatalf("--reformat: %v", err)
	}
	closeStore()
	_, closeStore, err = openNodeStore(dir, 3, false)
	if err != nil {
		t.Fatalf("start on a store its node closed: %v", err)
	}
	closeStore()
}

// TestCrashtestCatchesLogOrderMutant: a store that logs a write after it
// released the key's lock (mutation wal-log-after-unlock) can replay two
// writes of one key in the other order; the shared-key rounds' history
// check finds it (about one round in eight: the test stops at the first).
func TestCrashtestCatchesLogOrderMutant(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin, dir := scalestoreBinary(t), t.TempDir()
	for seed := 5; seed < 65; seed++ {
		var out, errb strings.Builder
		code := runCrashtest([]string{"--data", dir, "--rounds", "1", "--seed", strconv.Itoa(seed), "--mutant", "wal-log-after-unlock", "--bin", bin}, &out, &errb)
		if code == 1 && strings.Contains(errb.String(), "not linearizable") {
			t.Logf("caught at seed %d: %s", seed, strings.SplitN(errb.String(), "\n", 2)[0])
			return
		}
		if code != 0 {
			t.Fatalf("seed %d: exit %d\n%s\n%s", seed, code, out.String(), errb.String())
		}
	}
	t.Fatal("the mutant survived 60 rounds")
}

// crashtest --cluster: node processes killed (kill -9), partitioned and
// paused over tcp and shm while Redis clients write, the others going on
// without them (membership on an embedded etcd); every round whole.
func TestCrashtestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	var out, errb strings.Builder
	// Seed 4: kill -9 over tcp, a partition over shm, kill -9 over tcp, a
	// pause over shm of node 0, the bootstrap node (replicas 2, the
	// default: the survivors serve every key meanwhile).
	code := runCrashtest([]string{"--cluster", "--data", t.TempDir(), "--rounds", "4", "--seed", "4", "--lease", "2s", "--bin", scalestoreBinary(t)}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "whole 4 (node 0: 1), lost 0, failed 0") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"(tcp): kill -9 of node 2", "(shm): partition of node 2", "(tcp): kill -9 of node 1", "(shm): pause of node 0"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no round %q:\n%s", want, out.String())
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "round ") {
			continue
		}
		var served, failed int
		_, rest, _ := strings.Cut(line, "; outage ")
		if _, err := fmt.Sscanf(rest, "%d operations served, %d failed", &served, &failed); err != nil || served == 0 {
			t.Fatalf("no operation served during the outage (%v): %s", err, line)
		}
	}
	t.Log(out.String())
}
