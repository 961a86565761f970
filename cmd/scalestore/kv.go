package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/scalestore-go/scalestore"
)

const kvUsage = `Usage: scalestore kv --data DIR [flags] [COMMAND ARGS...]

Opens the single-node store in DIR (created if missing) and runs one command
given as arguments, or reads commands from standard input, one per line:

  put KEY VALUE     set KEY to VALUE (prints OK)
  get KEY           print the value, or "not found"
  delete KEY        print "deleted", or "not found"
  scan FROM TO      print "KEY VALUE" for every key in [FROM, TO) in order
                    (FROM "-": from the first key; TO "-": no upper
                    bound); stops at a page it
                    cannot read
  salvage FROM TO   like scan, but reads on past unreadable pages (a corrupt
                    or lost page) and prints "unreadable: keys LO through HI"
                    for the keys each one held; fails if it printed any

Keys are 1 to 256 bytes, a key and its value together at most 1024 bytes;
values run to the end of the line. Every page is written back and the store
closed cleanly on exit, on end of input and on Ctrl-C.

A put or delete is durable when it prints its answer: its record is in the
store's redo log (DIR/scalestore.wal) and synced to the device first. With
--no-sync the record is only handed to the operating system: it survives
kv being killed, not a power failure. A store whose process was killed
recovers at the next open (its pages are put back as of the last checkpoint
and the log applied again); kv says so on standard error.

A store that cannot be recovered (one written by a build without the log,
or whose log or undo journal was removed) is refused at the next open.
--unclean opens it read-only to get out what it still holds: a key behind a
page it cannot read fails with an error naming the page, and salvage lists
every key it can read and the key ranges it cannot. To copy what survives
into a new store:

  scalestore kv --data OLD --unclean salvage - - | grep -v '^unreadable: ' |
      sed 's/^/put /' | scalestore kv --data NEW

'scalestore crashtest' kills writers at random moments and checks that no
reopened store is ever short of an acknowledged write, or refused.

Flags:
`

func runKV(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, kvUsage); fs.PrintDefaults() }
	dir := fs.String("data", "", "directory of the store (required)")
	cache := fs.Int("cache-pages", 4096, "4 KiB frames in memory")
	unclean := fs.Bool("unclean", false, "open a store that cannot be recovered, read-only (see above)")
	noSync := fs.Bool("no-sync", false, "answer a write once its log record is handed to the OS, without waiting for the device (see above)")
	checkpoint := fs.Int64("checkpoint-bytes", 0, "log bytes between checkpoints (0: the default, 64 MiB)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "kv: --data DIR is required")
		return 2
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "kv: %v\n", err)
		return 1
	}
	db, err := scalestore.Open(*dir, scalestore.Options{CachePages: *cache, OpenUnclean: *unclean,
		NoSync: *noSync, CheckpointBytes: *checkpoint})
	if err != nil {
		fmt.Fprintf(stderr, "kv: %v\n", err)
		return 1
	}
	reportRecovery(stderr, "kv", db)
	// Close cleanly on Ctrl-C as well.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	interrupted := make(chan struct{})
	go func() {
		if _, ok := <-sig; ok {
			close(interrupted)
		}
	}()
	code := 0
	out := bufio.NewWriter(stdout)
	if fs.NArg() > 0 {
		if err := kvCommand(db, fs.Args(), strings.Join(fs.Args(), " "), out); err != nil {
			fmt.Fprintf(stderr, "kv: %v\n", err)
			code = 2
		}
	} else {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 4096), 1<<20)
	lines:
		for line := 1; sc.Scan(); line++ {
			select {
			case <-interrupted:
				break lines
			default:
			}
			text := strings.TrimSpace(sc.Text())
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
			if err := kvCommand(db, strings.Fields(text), text, out); err != nil {
				fmt.Fprintf(out, "error: line %d: %v\n", line, err)
				code = 1
			}
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(stderr, "kv: reading input: %v\n", err)
			code = 1
		}
	}
	out.Flush()
	if err := db.Close(); err != nil {
		fmt.Fprintf(stderr, "kv: closing the store: %v\n", err)
		return 1
	}
	return code
}

// kvCommand runs one command; line is the raw text (a value may hold spaces).
func kvCommand(db *scalestore.DB, f []string, line string, out io.Writer) error {
	switch strings.ToLower(f[0]) {
	case "put":
		if len(f) < 3 {
			return errors.New("usage: put KEY VALUE")
		}
		rest := strings.TrimSpace(line[len(f[0]):])
		val := strings.TrimSpace(rest[len(f[1]):])
		if err := db.Put([]byte(f[1]), []byte(val)); err != nil {
			return err
		}
		fmt.Fprintln(out, "OK")
	case "get":
		if len(f) != 2 {
			return errors.New("usage: get KEY")
		}
		v, ok, err := db.Get([]byte(f[1]), nil)
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(out, "not found")
		} else {
			fmt.Fprintln(out, string(v))
		}
	case "delete", "del":
		if len(f) != 2 {
			return errors.New("usage: delete KEY")
		}
		found, err := db.Delete([]byte(f[1]))
		if err != nil {
			return err
		}
		if found {
			fmt.Fprintln(out, "deleted")
		} else {
			fmt.Fprintln(out, "not found")
		}
	case "scan", "salvage":
		cmd := strings.ToLower(f[0])
		if len(f) != 3 {
			return fmt.Errorf("usage: %s FROM TO", cmd)
		}
		var from, to []byte
		if f[1] != "-" {
			from = []byte(f[1])
		}
		if f[2] != "-" {
			to = []byte(f[2])
		}
		emit := func(k, v []byte) bool {
			fmt.Fprintf(out, "%s %s\n", k, v)
			return true
		}
		if cmd == "scan" {
			return db.Scan(from, to, emit)
		}
		skipped := 0
		err := db.Salvage(from, to, emit, func(lo, hi []byte, err error) bool {
			through := "the end"
			if hi != nil {
				through = fmt.Sprintf("%q", hi)
			}
			fmt.Fprintf(out, "unreadable: keys %q through %s: %v\n", lo, through, err)
			skipped++
			return true
		})
		if err == nil && skipped > 0 {
			err = fmt.Errorf("salvage: keys were unreadable in %d range(s), listed above", skipped)
		}
		return err
	default:
		return fmt.Errorf("unknown command %q (put, get, delete, scan, salvage)", f[0])
	}
	return nil
}

// reportRecovery says on w what Open did to recover a killed store.
func reportRecovery(w io.Writer, who string, db *scalestore.DB) {
	if r := db.Recovery(); r.Recovered {
		fmt.Fprintf(w, "%s: recovered a store that was not closed cleanly: %d pages put back as of the last checkpoint, "+
			"%d log records (%d bytes) applied again; the log ended at %s\n", who, r.RolledBack, r.Replayed, r.LogBytes, r.LogEnd)
	}
}
