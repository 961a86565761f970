package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/mutation"
)

const crashtestUsage = `Usage: scalestore crashtest --data DIR [--rounds N] [--seed S] [--json]
       scalestore crashtest --cluster --data DIR [--rounds N] ...   (node processes: --cluster --help)

Kills writers of a store with SIGKILL at random moments and checks what the
store says at its next open. Each round, in DIR/round-N:

  1. picks, from its seed, what to kill: a new store or an old one (closed
     cleanly once with keys of its own), written by 'scalestore kv' or by a
     program on the embedded API with 1 to 4 concurrent writers, synced
     (three rounds in four) or with --no-sync, puts and every tenth write a
     delete, with a cache of 16 to 4096 pages (a small cache evicts all the
     time) and a checkpoint every 64 KiB to 64 MiB of log, killed early
     (creating the file, the superblock, the first allocation), during the
     load (evictions, checkpoints), or while it closes;
     In one API round in two (shared-key rounds, or every round with
     --shared) the threads put, delete and get the same 8 keys instead of
     keys of their own, each operation printed with its call and return
     times;
  2. runs the writer as a child process, notes every write it acknowledged
     (kv's answer, an ack line from the API writer), and kills it;
  3. opens the store and classifies the round:
       whole            it opened (recovering if it must), every
                        acknowledged put is there with its value and every
                        acknowledged delete's key is absent
       refused          Open refused it as unclean (ErrUnclean); OpenUnclean
                        is then tried, to read what it holds
       short            it opened, and an acknowledged write is missing
                        (shared-key rounds: the writer's history with a
                        read of every key after the open is not
                        linearizable, porcupine per key; a write the kill
                        cut may have happened or not, but a value read or
                        acknowledged before the kill must not be followed
                        by an older one: the redo log must hold the writes
                        in the order they were applied)
       failed           anything else (another error, a protocol violation)

It prints the counts, and for a bad round (anything but whole) its seed and
the command that replays it (the same choices; the kill lands at the same
delay, which is not the same instruction twice). It exits 1 if any round was
bad. A round's directory is removed unless the round was bad (a bad
shared-key round keeps its history there, history.jsonl). --mutant
wal-log-after-unlock runs the writers with the store logging a write after
it released the key's lock: some round must then be short.

The store promises every round is whole: a write that returned is in the
redo log (synced, or with --no-sync handed to the OS, which a killed process
does not lose), and Open recovers a killed store from it.

Flags:
`

// crashRound is what one round does, drawn from its seed.
type crashRound struct {
	Seed    uint64 `json:"seed"`
	Writer  string `json:"writer"` // "kv" or "api"
	Old     bool   `json:"old_store"`
	Threads int    `json:"threads"`
	// Shared: the API writer's threads put, delete and get the same
	// sharedKeys keys, and the round checks their whole history with
	// porcupine (crashSharedCheck) instead of key by key.
	Shared        bool   `json:"shared_keys,omitempty"`
	HistoryOps    int    `json:"history_ops,omitempty"`
	Mutant        string `json:"mutant,omitempty"`
	Sync          bool   `json:"sync"`
	CheckpointKiB int    `json:"checkpoint_kib"`
	Cache         int    `json:"cache_pages"`
	Kill          string `json:"kill"` // "early", "load" or "close"
	DelayUS       int64  `json:"delay_us"`
	Ops           int    `json:"ops"` // writes offered ("close": all of them, then Close)
	Acked         int    `json:"acked"`
	Deleted       int    `json:"acked_deletes"`
	Recovered     bool   `json:"recovered"`
	Replayed      int    `json:"replayed_records"`
	Outcome       string `json:"outcome"`
	Detail        string `json:"detail,omitempty"`
	Salvaged      int    `json:"salvaged_keys,omitempty"`
	LostPages     int    `json:"lost_ranges,omitempty"`
}

// baseKeys is how many keys an old store holds from its clean session.
const baseKeys = 2000

func drawRound(seed uint64) crashRound {
	r := rand.New(rand.NewPCG(seed, 0x5ca1e))
	c := crashRound{Seed: seed, Writer: "kv", Threads: 1, Old: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		c.Writer, c.Threads = "api", 1+r.IntN(4)
		c.Shared = r.IntN(2) == 0
	}
	c.Cache = []int{16, 32, 64, 256, 4096}[r.IntN(5)]
	c.Sync = r.IntN(4) != 0
	c.CheckpointKiB = []int{64, 256, 1024, 64 << 10}[r.IntN(4)]
	switch x := r.IntN(10); {
	case x < 2:
		c.Kill, c.DelayUS, c.Ops = "early", r.Int64N(15_000), 1_000_000
	case x < 7:
		c.Kill, c.DelayUS, c.Ops = "load", 15_000+r.Int64N(300_000), 1_000_000
	default:
		c.Kill, c.DelayUS, c.Ops = "close", r.Int64N(40_000), 100+r.IntN(40_000)
	}
	if c.Sync && c.Kill == "close" {
		c.Ops = 100 + c.Ops%4000 // synced writes take a sync each (shared by concurrent writers)
	}
	return c
}

func runCrashtest(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "writer" {
		return runCrashWriter(args[1:], stdout, stderr)
	}
	for i, a := range args {
		if a == "--cluster" || a == "-cluster" {
			return runCrashtestCluster(append(append([]string(nil), args[:i]...), args[i+1:]...), stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("crashtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, crashtestUsage); fs.PrintDefaults() }
	dir := fs.String("data", "", "directory for the rounds' stores (required; each round uses DIR/round-N)")
	rounds := fs.Int("rounds", 20, "rounds to run")
	seed := fs.Uint64("seed", 0, "seed of round 0 (round N uses seed+N); 0: from the clock")
	asJSON := fs.Bool("json", false, "print one JSON line per round and a summary line")
	bin := fs.String("bin", "", "the scalestore binary the writers run (default: this one)")
	shared := fs.Bool("shared", false, "every round a shared-key round (the API writer, 2 to 4 threads on the same keys, the history checked with porcupine)")
	mutant := fs.String("mutant", "", "run the writers with this mutation of the store (wal-log-after-unlock): some round must then be bad; implies --shared")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *mutant != "" {
		if !slices.Contains(mutation.StoreNames, *mutant) {
			fmt.Fprintf(stderr, "crashtest: --mutant %q: want one of %v\n", *mutant, mutation.StoreNames)
			return 2
		}
		*shared = true
	}
	if *dir == "" || *rounds < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "crashtest: --data DIR is required, --rounds must be at least 1, and there are no arguments")
		return 2
	}
	if *bin == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "crashtest: finding this binary: %v (pass --bin)\n", err)
			return 2
		}
		*bin = exe
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()) & (1<<48 - 1)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "crashtest: %v\n", err)
		return 1
	}
	counts := map[string]int{}
	var bad []crashRound
	start := time.Now()
	enc := json.NewEncoder(stdout)
	for i := range *rounds {
		c := drawRound(*seed + uint64(i))
		if *shared {
			c.Writer, c.Shared, c.Threads = "api", true, max(c.Threads, 2)
		}
		if c.Mutant = *mutant; c.Mutant != "" && c.Kill != "load" {
			// A mutant's rounds are killed during the load: the writes
			// since the last checkpoint come back from the log.
			c.Kill, c.DelayUS, c.Ops = "load", 15_000+int64(c.Seed%300)*1000, 1_000_000
		}
		rdir := filepath.Join(*dir, fmt.Sprintf("round-%d", i))
		os.RemoveAll(rdir)
		crashRun(&c, *bin, rdir)
		counts[c.Outcome]++
		if c.Outcome != "whole" {
			bad = append(bad, c)
			fmt.Fprintf(stderr, "crashtest: round %d %s: %s\n  replay: %s crashtest --data %s --rounds 1 --seed %d\n  kept: %s\n",
				i, c.Outcome, c.Detail, os.Args[0], *dir, c.Seed, rdir)
		} else {
			os.RemoveAll(rdir)
		}
		if *asJSON {
			enc.Encode(c)
		}
		if (i+1)%25 == 0 || i+1 == *rounds {
			fmt.Fprintf(stderr, "crashtest: %d/%d rounds, %s: whole %d, refused %d, short %d, failed %d\n",
				i+1, *rounds, time.Since(start).Round(time.Second), counts["whole"], counts["refused"],
				counts["short"], counts["failed"])
		}
	}
	if *asJSON {
		enc.Encode(map[string]any{"rounds": *rounds, "seed": *seed, "whole": counts["whole"], "refused": counts["refused"],
			"short": counts["short"], "failed": counts["failed"]})
	} else {
		fmt.Fprintf(stdout, "crashtest: %d rounds (seed %d): whole %d, refused %d, short %d, failed %d\n",
			*rounds, *seed, counts["whole"], counts["refused"], counts["short"], counts["failed"])
	}
	if len(bad) > 0 {
		return 1
	}
	return 0
}

// crashRun runs one round in dir and fills c's outcome.
func crashRun(c *crashRound, bin, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.Outcome, c.Detail = "failed", err.Error()
		return
	}
	if c.Old {
		// The old store's clean session: every one of its keys must
		// survive whatever comes next, unless the store is refused.
		if err := crashBase(dir); err != nil {
			c.Outcome, c.Detail = "failed", "writing the old store: "+err.Error()
			return
		}
	}
	acked, err := crashWrite(c, bin, dir)
	c.Acked, c.Deleted = len(acked.puts), len(acked.deletes)
	if err != nil {
		c.Outcome, c.Detail = "failed", err.Error()
		return
	}
	crashCheck(c, dir, acked)
}

// crashAcks are the writes a writer acknowledged: puts of crashKey(i) and
// deletes of crashKey(i).
type crashAcks struct {
	puts    []int
	deletes []int
	// shared rounds: the operations that returned, and those called but
	// not returned when the writer was killed (by writer-side id).
	ops     []checker.Op
	pending map[int]checker.Op
}

// crashIsDelete reports whether write j of a writer's sequence (j counts
// one thread's writes) is a delete of its previous key instead of a put.
func crashIsDelete(j int) bool { return j%10 == 9 }

func baseKey(i int) []byte  { return fmt.Appendf(nil, "b%06d", i) }
func crashKey(i int) string { return fmt.Sprintf("k%08d", i) }
func crashVal(i int) string { return fmt.Sprintf("v%d-%s", i, strings.Repeat("x", i%97)) }

// crashBase writes the old store's keys and closes it cleanly.
func crashBase(dir string) error {
	db, err := scalestore.Open(dir, scalestore.Options{CachePages: 64})
	if err != nil {
		return err
	}
	for i := range baseKeys {
		if err := db.Put(baseKey(i), baseKey(i)); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

// crashWrite runs the round's writer and kills it; it returns the writes
// it acknowledged.
func crashWrite(c *crashRound, bin, dir string) (crashAcks, error) {
	var cmd *exec.Cmd
	common := []string{"--data", dir, "--cache-pages", strconv.Itoa(c.Cache),
		"--checkpoint-bytes", strconv.Itoa(c.CheckpointKiB << 10), "--no-sync=" + strconv.FormatBool(!c.Sync)}
	if c.Writer == "kv" {
		cmd = exec.Command(bin, append([]string{"kv"}, common...)...)
	} else {
		args := append(append([]string{"crashtest", "writer"}, common...),
			"--threads", strconv.Itoa(c.Threads), "--ops", strconv.Itoa(c.Ops))
		if c.Shared {
			args = append(args, "--shared-keys", strconv.Itoa(sharedKeys), "--seed", strconv.FormatUint(c.Seed, 10))
		}
		if c.Mutant != "" {
			args = append(args, "--mutant", c.Mutant)
		}
		cmd = exec.Command(bin, args...)
	}
	var stdin io.WriteCloser
	var err error
	if c.Writer == "kv" {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return crashAcks{}, err
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return crashAcks{}, err
	}
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		return crashAcks{}, fmt.Errorf("starting the writer: %w", err)
	}
	started := time.Now()
	if stdin != nil {
		go func() { // kv's input: its puts, then end of input (it closes the store)
			w := bufio.NewWriterSize(stdin, 1<<16)
			for i := range c.Ops {
				var err error
				if crashIsDelete(i) {
					_, err = fmt.Fprintf(w, "delete %s\n", crashKey(i-1))
				} else {
					_, err = fmt.Fprintf(w, "put %s %s\n", crashKey(i), crashVal(i))
				}
				if err != nil {
					break
				}
			}
			w.Flush()
			stdin.Close()
		}()
	}
	var (
		mu      sync.Mutex
		acked   = crashAcks{pending: map[int]checker.Op{}}
		closing = make(chan struct{})
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		n, once := 0, sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "OK" || line == "deleted" || line == "not found": // kv: the n-th write
				mu.Lock()
				if crashIsDelete(n) {
					acked.deletes = append(acked.deletes, n-1)
				} else {
					acked.puts = append(acked.puts, n)
				}
				n++
				if n == c.Ops {
					once.Do(func() { close(closing) })
				}
				mu.Unlock()
			case line == "closing":
				once.Do(func() { close(closing) })
			case strings.HasPrefix(line, "ack "):
				if i, err := strconv.Atoi(line[4:]); err == nil {
					mu.Lock()
					acked.puts = append(acked.puts, i)
					mu.Unlock()
				}
			case strings.HasPrefix(line, "del "):
				if i, err := strconv.Atoi(line[4:]); err == nil {
					mu.Lock()
					acked.deletes = append(acked.deletes, i)
					mu.Unlock()
				}
			case strings.HasPrefix(line, "call "), strings.HasPrefix(line, "ret "):
				mu.Lock()
				acked.sharedLine(line)
				mu.Unlock()
			}
		}
	}()
	delay := time.Duration(c.DelayUS) * time.Microsecond
	if c.Kill == "close" {
		select {
		case <-closing:
		case <-time.After(2 * time.Minute):
		case <-done: // it finished before we knew it was closing
		}
		time.Sleep(delay)
	} else {
		time.Sleep(delay - time.Since(started))
	}
	cmd.Process.Kill()
	<-done
	cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	return acked, nil
}

// crashCheck opens the killed store and classifies the round.
func crashCheck(c *crashRound, dir string, acked crashAcks) {
	db, err := scalestore.Open(dir, scalestore.Options{CachePages: 4096})
	if errors.Is(err, scalestore.ErrUnclean) {
		c.Outcome = "refused"
		db, err = scalestore.Open(dir, scalestore.Options{CachePages: 4096, OpenUnclean: true})
		if err != nil {
			c.Outcome, c.Detail = "failed", "OpenUnclean: "+err.Error()
			return
		}
		var other error // a skipped page for any reason but an unreadable page
		err = db.Salvage(nil, nil, func(k, v []byte) bool { c.Salvaged++; return true },
			func(lo, hi []byte, err error) bool {
				c.LostPages++
				if !errors.Is(err, scalestore.ErrUnreadable) {
					other = err
				}
				return other == nil
			})
		if err == nil {
			err = other
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			c.Outcome, c.Detail = "failed", "reading it with OpenUnclean: "+err.Error()
		}
		return
	}
	if err != nil {
		c.Outcome, c.Detail = "failed", "Open: "+err.Error()
		return
	}
	defer db.Close()
	r := db.Recovery()
	c.Recovered, c.Replayed = r.Recovered, r.Replayed
	missing, first := 0, ""
	note := func(what string) {
		if missing == 0 {
			first = what
		}
		missing++
	}
	if c.Old {
		for i := range baseKeys {
			if v, ok, err := db.Get(baseKey(i), nil); err != nil || !ok || string(v) != string(baseKey(i)) {
				note(fmt.Sprintf("key %s of the clean session: found %v, err %v", baseKey(i), ok, err))
			}
		}
	}
	if c.Shared {
		if missing > 0 {
			c.Outcome, c.Detail = "short", fmt.Sprintf("%d acknowledged writes missing, the first: %s", missing, first)
			return
		}
		crashSharedCheck(c, db, acked, dir)
		return
	}
	deleted := map[int]bool{}
	for _, i := range acked.deletes {
		deleted[i] = true
		if _, ok, err := db.Get([]byte(crashKey(i)), nil); err != nil || ok {
			note(fmt.Sprintf("key %s, whose delete was acknowledged: found %v, err %v", crashKey(i), ok, err))
		}
	}
	for _, i := range acked.puts {
		if deleted[i] {
			continue
		}
		v, ok, err := db.Get([]byte(crashKey(i)), nil)
		// The writer's next write may be this key's delete, done but not
		// acknowledged before the kill: the key may then be gone.
		gone := !ok && err == nil && crashIsDelete(i/max(c.Threads, 1)+1)
		if (err != nil || !ok || string(v) != crashVal(i)) && !gone {
			note(fmt.Sprintf("acknowledged key %s: found %v, err %v", crashKey(i), ok, err))
		}
	}
	if missing > 0 {
		c.Outcome, c.Detail = "short", fmt.Sprintf("%d acknowledged writes missing, the first: %s", missing, first)
		return
	}
	c.Outcome = "whole"
}

// runCrashWriter is crashtest's writer on the embedded API: --threads
// goroutines put keys crashKey(i) (i = n*threads + thread) and print
// "ack i" once each Put returned; every tenth write of a thread
// (crashIsDelete(n)) deletes its previous key instead and prints "del j".
// After --ops writes it prints "closing" and closes the store.
func runCrashWriter(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("crashtest writer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", "", "directory of the store")
	cache := fs.Int("cache-pages", 4096, "4 KiB frames in memory")
	threads := fs.Int("threads", 1, "concurrent writers")
	ops := fs.Int("ops", 1000, "writes in all")
	noSync := fs.Bool("no-sync", false, "Options.NoSync")
	checkpoint := fs.Int64("checkpoint-bytes", 0, "Options.CheckpointBytes")
	mutant := fs.String("mutant", "", "enable this mutation of the store (mutation.StoreNames) in the writer")
	shared := fs.Int("shared-keys", 0, "every thread puts, deletes and gets these keys (printing call and ret lines) instead of keys of its own")
	seed := fs.Uint64("seed", 1, "with --shared-keys: the threads' choices")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || *threads < 1 {
		fmt.Fprintln(stderr, "crashtest writer: --data DIR is required and --threads must be at least 1")
		return 2
	}
	if *mutant != "" {
		if err := mutation.Enable(*mutant); err != nil {
			fmt.Fprintf(stderr, "crashtest writer: %v\n", err)
			return 2
		}
	}
	db, err := scalestore.Open(*dir, scalestore.Options{CachePages: *cache, NoSync: *noSync, CheckpointBytes: *checkpoint})
	if err != nil {
		fmt.Fprintf(stderr, "crashtest writer: %v\n", err)
		return 1
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := false
	if *shared > 0 {
		failed = !sharedWriters(db, *threads, *ops, *shared, *seed, stdout, stderr)
		*threads = 0 // no writers of keys of their own
	}
	for t := range *threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := db.NewSession()
			defer s.Close()
			line := make([]byte, 0, 32)
			for i := t; i < *ops; i += *threads {
				var err error
				what, key := "ack ", i
				if crashIsDelete(i / *threads) {
					what, key = "del ", i-*threads
					_, err = s.Delete([]byte(crashKey(key)))
				} else {
					err = s.Put([]byte(crashKey(i)), []byte(crashVal(i)))
				}
				if err != nil {
					mu.Lock()
					fmt.Fprintf(stderr, "crashtest writer: write %d: %v\n", i, err)
					failed = true
					mu.Unlock()
					return
				}
				line = strconv.AppendInt(append(line[:0], what...), int64(key), 10)
				line = append(line, '\n')
				mu.Lock()
				stdout.Write(line) // unbuffered: once printed, acknowledged
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Fprintln(stdout, "closing")
	if err := db.Close(); err != nil {
		fmt.Fprintf(stderr, "crashtest writer: close: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "closed")
	if failed {
		return 1
	}
	return 0
}

// sharedKeys is how many keys a shared round's writers share.
const sharedKeys = 8

func sharedKey(k int) []byte { return fmt.Appendf(nil, "s%03d", k) }

// sharedVal is the value of the write with id: its id, then a length that
// varies with it.
func sharedVal(id uint64) []byte {
	return fmt.Appendf(nil, "u%d-%s", id, strings.Repeat("y", int(id%211)))
}

// sharedID is the write id of a value sharedVal made; false if v is not
// one.
func sharedID(v []byte) (uint64, bool) {
	s, ok := strings.CutPrefix(string(v), "u")
	if !ok {
		return 0, false
	}
	s, _, ok = strings.Cut(s, "-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil && string(sharedVal(id)) == string(v)
}

// sharedWriters runs threads goroutines that put (unique values), delete
// and get keys of a set of keys they share, ops operations in all. Each
// operation prints "call ID KIND KEY VALUE NS" before it starts and "ret
// ID VALUE NS" once it returned (KIND p, d or g; a get's VALUE is the id it
// read, 0 for none), with this process's clock: the parent turns them into
// a history. It reports false if an operation failed.
func sharedWriters(db *scalestore.DB, threads, ops, keys int, seed uint64, stdout, stderr io.Writer) bool {
	var mu sync.Mutex
	var wg sync.WaitGroup
	ok := true
	say := func(line []byte) {
		mu.Lock()
		stdout.Write(line) // unbuffered: once printed, it happened
		mu.Unlock()
	}
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := db.NewSession()
			defer s.Close()
			rng := rand.New(rand.NewPCG(seed, uint64(t)))
			line := make([]byte, 0, 64)
			for i := t; i < ops; i += threads {
				k := rng.IntN(keys)
				kind, val := byte('g'), uint64(0)
				switch x := rng.IntN(20); {
				case x < 9:
					kind, val = 'p', uint64(i)+1
				case x < 11:
					kind = 'd'
				}
				line = fmt.Appendf(line[:0], "call %d %c %d %d %d\n", i, kind, k, val, time.Now().UnixNano())
				say(line)
				var err error
				got := uint64(0)
				switch kind {
				case 'p':
					err = s.Put(sharedKey(k), sharedVal(val))
					got = val
				case 'd':
					_, err = s.Delete(sharedKey(k))
				default:
					var v []byte
					var found bool
					v, found, err = s.Get(sharedKey(k), nil)
					if err == nil && found {
						var valid bool
						if got, valid = sharedID(v); !valid {
							err = fmt.Errorf("key %s holds %q, which no writer wrote", sharedKey(k), v)
						}
					}
				}
				if err != nil {
					mu.Lock()
					fmt.Fprintf(stderr, "crashtest writer: operation %d: %v\n", i, err)
					ok = false
					mu.Unlock()
					return
				}
				say(fmt.Appendf(line[:0], "ret %d %d %d\n", i, got, time.Now().UnixNano()))
			}
		}()
	}
	wg.Wait()
	return ok
}

// sharedLine records one call or ret line of a shared round's writer.
func (a *crashAcks) sharedLine(line string) {
	f := strings.Fields(line)
	num := func(i int) int64 {
		if i >= len(f) {
			return -1
		}
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	id := int(num(1))
	switch {
	case f[0] == "call" && len(f) == 6 && id >= 0:
		op := checker.Op{Client: id, Page: uint64(num(3)), Value: uint64(num(4)), Call: num(5), Kind: checker.KindWrite}
		if f[2] == "g" {
			op.Kind = checker.KindRead
		}
		a.pending[id] = op // a delete is a write of 0, the value of an absent key
	case f[0] == "ret" && len(f) == 4:
		op, ok := a.pending[id]
		if !ok {
			return
		}
		delete(a.pending, id)
		op.Value, op.Return = uint64(num(2)), num(3)
		a.ops = append(a.ops, op)
	}
}

// crashSharedCheck checks a shared round: every key read after the
// restart, with the writer's history, must be linearizable per key. A
// write the kill cut may have happened at any time after its call, or
// never; a value acknowledged or read before the kill must not be followed
// by an older one.
func crashSharedCheck(c *crashRound, db *scalestore.DB, acked crashAcks, dir string) {
	ops := acked.ops
	end := int64(0)
	for _, op := range ops {
		end = max(end, op.Return)
	}
	for _, op := range acked.pending {
		end = max(end, op.Call)
	}
	end = max(end, time.Now().UnixNano()) + 1
	for _, op := range acked.pending {
		if op.Kind == checker.KindWrite {
			// Cut by the kill: it took effect before the kill or never,
			// so it may come before or after the reads below.
			op.Return = end + 3
			ops = append(ops, op)
		}
	}
	for k := range sharedKeys {
		v, found, err := db.Get(sharedKey(k), nil)
		if err != nil {
			c.Outcome, c.Detail = "failed", fmt.Sprintf("reading key %s after the restart: %v", sharedKey(k), err)
			return
		}
		op := checker.Op{Client: -1 - k, Page: uint64(k), Kind: checker.KindRead, Call: end + 1, Return: end + 2}
		if found {
			id, ok := sharedID(v)
			if !ok {
				c.Outcome, c.Detail = "short", fmt.Sprintf("key %s holds %q after the restart, which no writer wrote", sharedKey(k), v)
				return
			}
			op.Value = id
		}
		ops = append(ops, op)
	}
	c.HistoryOps = len(ops)
	res, _ := checker.Check(ops, time.Minute)
	if !res.Ok {
		c.Outcome, c.Detail = "short", fmt.Sprintf("the shared keys' history is not linearizable on keys %v (%d operations; %s)", res.BadPages, len(ops), filepath.Join(dir, "history.jsonl"))
		h := checker.NewHistory(len(ops))
		for _, op := range ops {
			h.Add(op)
		}
		if f, err := os.Create(filepath.Join(dir, "history.jsonl")); err == nil {
			h.WriteJSONLines(f)
			f.Close()
		}
		return
	}
	c.Outcome = "whole"
}
