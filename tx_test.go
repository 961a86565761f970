package scalestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

func memDB(t *testing.T, cachePages int) *DB {
	t.Helper()
	db, err := Open("", Options{InMemory: true, CachePages: cachePages, Slots: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// incr is Redis's INCR through Modify.
func incr(db *DB, key []byte) error {
	return db.Modify(key, func(old []byte, found bool) ([]byte, bool, bool) {
		n := 0
		if found {
			n, _ = strconv.Atoi(string(old))
		}
		return strconv.AppendInt(nil, int64(n+1), 10), true, true
	})
}

// Concurrent increments through Modify lose none; growing values split
// leaves and every key keeps its count; delete and no-op answers work.
func TestModifyIsAtomic(t *testing.T) {
	db := memDB(t, 256)
	const goroutines, each = 8, 300
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := incr(db, []byte("counter")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	v, _, _ := db.Get([]byte("counter"), nil)
	if string(v) != strconv.Itoa(goroutines*each) {
		t.Fatalf("counter = %s, want %d", v, goroutines*each)
	}
	// Grow 400 keys' values past what their leaves hold: splits.
	for i := range 400 {
		if err := db.Put(fmt.Appendf(nil, "k%04d", i), bytes.Repeat([]byte{'a'}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 {
		err := db.Modify(fmt.Appendf(nil, "k%04d", i), func(old []byte, found bool) ([]byte, bool, bool) {
			return append(bytes.Clone(old), bytes.Repeat([]byte{'b'}, 300)...), true, true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 {
		v, ok, err := db.Get(fmt.Appendf(nil, "k%04d", i), nil)
		if err != nil || !ok || len(v) != 400 {
			t.Fatalf("k%04d: %d bytes, %v %v", i, len(v), ok, err)
		}
	}
	// write false leaves it; exists false deletes it.
	if err := db.Modify([]byte("counter"), func([]byte, bool) ([]byte, bool, bool) { return []byte("x"), true, false }); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := db.Get([]byte("counter"), nil); string(v) != strconv.Itoa(goroutines*each) {
		t.Fatalf("no-op Modify changed the value to %q", v)
	}
	if err := db.Modify([]byte("counter"), func([]byte, bool) ([]byte, bool, bool) { return nil, false, true }); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.Get([]byte("counter"), nil); ok {
		t.Fatal("Modify with exists false did not delete")
	}
	// Returning the page's own bytes is refused, not misapplied.
	db.Put([]byte("alias"), []byte("abc"))
	err := db.Modify([]byte("alias"), func(old []byte, _ bool) ([]byte, bool, bool) { return old[:2], true, true })
	if err == nil {
		t.Fatal("Modify accepted a value aliasing the page")
	}
}

func account(i int) []byte { return fmt.Appendf(nil, "acct%03d", i) }

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// openAccounts puts accounts balances of start in one transaction, each
// followed by a filler of fill bytes that spreads them over several leaves.
func openAccounts(t *testing.T, update func(func(*Tx) error) error, accounts int, start uint64, fill int) {
	t.Helper()
	err := update(func(tx *Tx) error {
		for i := range accounts {
			if err := tx.Put(account(i), binary.LittleEndian.AppendUint64(nil, start)); err != nil {
				return err
			}
			if err := tx.Put(fmt.Appendf(nil, "acct%03d-fill", i), bytes.Repeat([]byte{'f'}, fill)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A bank: transfers in Update between random accounts, readers that sum
// every account in View. Every View sees the same total; at the end the
// total is unchanged and no transfer was lost.
func TestUpdateViewBank(t *testing.T) {
	db := memDB(t, 256)
	const accounts, start = 40, 1000
	openAccounts(t, db.Update, accounts, start, 300)
	var wg, writers sync.WaitGroup
	stop := make(chan struct{})
	var views sync.Map
	for g := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 300 {
				from, to := (g*7+i*13)%accounts, (g*11+i*17+1)%accounts
				if from == to {
					continue
				}
				err := db.Update(func(tx *Tx) error {
					a, _, err := tx.Get(account(from), nil)
					if err != nil {
						return err
					}
					b, _, err := tx.Get(account(to), nil)
					if err != nil {
						return err
					}
					if u64(a) < 5 {
						return nil
					}
					tx.Put(account(from), binary.LittleEndian.AppendUint64(nil, u64(a)-5))
					return tx.Put(account(to), binary.LittleEndian.AppendUint64(nil, u64(b)+5))
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for {
				select {
				case <-stop:
					views.Store(r, n)
					return
				default:
				}
				var total uint64
				err := db.View(func(tx *Tx) error {
					total = 0
					for i := range accounts {
						v, ok, err := tx.Get(account(i), nil)
						if err != nil {
							return err
						}
						if !ok {
							return fmt.Errorf("account %d missing", i)
						}
						total += u64(v)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if total != accounts*start {
					t.Errorf("a View saw a total of %d, want %d", total, accounts*start)
					return
				}
				n++
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	var total uint64
	for i := range accounts {
		v, _, _ := db.Get(account(i), nil)
		total += u64(v)
	}
	if total != accounts*start {
		t.Fatalf("total %d after the transfers, want %d", total, accounts*start)
	}
	nv := 0
	views.Range(func(_, v any) bool { nv += v.(int); return true })
	t.Logf("%d views during the transfers", nv)
}

// An error from the function aborts: nothing is written. A View cannot
// write. Reads see the transaction's own writes. A conflict that never
// ends runs out of attempts with an error that says so.
func TestUpdateAbortsAndRetries(t *testing.T) {
	db := memDB(t, 64)
	boom := errors.New("boom")
	err := db.Update(func(tx *Tx) error {
		tx.Put([]byte("a"), []byte("1"))
		if v, ok, _ := tx.Get([]byte("a"), nil); !ok || string(v) != "1" {
			t.Errorf("own write read back as %q %v", v, ok)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want boom", err)
	}
	if _, ok, _ := db.Get([]byte("a"), nil); ok {
		t.Fatal("an aborted transaction wrote")
	}
	if err := db.View(func(tx *Tx) error { return tx.Put([]byte("a"), nil) }); !errors.Is(err, ErrTxReadOnly) {
		t.Fatalf("Put in View: %v", err)
	}
	runs := 0
	err = db.Update(func(tx *Tx) error {
		runs++
		if _, _, err := tx.Get([]byte("hot"), nil); err != nil {
			return err
		}
		// Another writer changes what this one read, every time.
		if err := db.Put([]byte("hot"), []byte(strconv.Itoa(runs))); err != nil {
			return err
		}
		return tx.Put([]byte("b"), []byte("x"))
	})
	if !errors.Is(err, ErrTxConflict) || runs != TxAttempts {
		t.Fatalf("endless conflict: %v after %d runs", err, runs)
	}
	if _, ok, _ := db.Get([]byte("b"), nil); ok {
		t.Fatal("a transaction that never validated wrote")
	}
	// Too many keys.
	err = db.Update(func(tx *Tx) error {
		for i := range TxMaxKeys + 1 {
			if err := tx.Put(fmt.Appendf(nil, "k%d", i), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrTxTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

// PutUnless writes blind over old values its check does not match; over
// one that matches, the commit applies nothing and the function runs
// again with PutUnless of that key declining, so that it reads the key.
// The check stays with a key a later Put or Delete of the transaction
// writes again; a key already read or written declines at once.
func TestUpdatePutUnless(t *testing.T) {
	db := memDB(t, 64)
	marked := func(old []byte) bool { return bytes.HasPrefix(old, []byte("M")) }
	for k, v := range map[string]string{"m": "M1", "p": "plain", "d": "M2"} {
		if err := db.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	var runs int
	var declined []string
	err := db.Update(func(tx *Tx) error {
		runs++
		declined = declined[:0]
		for _, k := range []string{"m", "p", "new"} {
			done, err := tx.PutUnless([]byte(k), []byte("blind"), marked)
			if err != nil {
				return err
			}
			if !done {
				declined = append(declined, k)
				old, _, err := tx.Get([]byte(k), nil)
				if err != nil {
					return err
				}
				if err := tx.Put([]byte(k), append([]byte("read "), old...)); err != nil {
					return err
				}
			}
		}
		// Written blind, then deleted: the check still applies.
		if done, err := tx.PutUnless([]byte("d"), []byte("blind"), marked); err != nil {
			return err
		} else if !done {
			declined = append(declined, "d")
		}
		_, err := tx.Delete([]byte("d"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 || fmt.Sprint(declined) != "[m d]" {
		t.Fatalf("%d runs, the last declined %v; want 2 runs, [m d]", runs, declined)
	}
	for k, want := range map[string]string{"m": "read M1", "p": "blind", "new": "blind"} {
		if v, ok, err := db.Get([]byte(k), nil); err != nil || !ok || string(v) != want {
			t.Fatalf("%s = %q %v %v, want %q", k, v, ok, err, want)
		}
	}
	if _, ok, _ := db.Get([]byte("d"), nil); ok {
		t.Fatal("d was not deleted")
	}
	// Declines for a key the transaction read or wrote; refused in View.
	err = db.Update(func(tx *Tx) error {
		if _, _, err := tx.Get([]byte("p"), nil); err != nil {
			return err
		}
		if err := tx.Put([]byte("q"), []byte("1")); err != nil {
			return err
		}
		for _, k := range []string{"p", "q"} {
			if done, err := tx.PutUnless([]byte(k), []byte("x"), marked); err != nil || done {
				return fmt.Errorf("PutUnless of %s after its read or write: %v %v", k, done, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *Tx) error {
		_, err := tx.PutUnless([]byte("p"), []byte("x"), marked)
		return err
	})
	if !errors.Is(err, ErrTxReadOnly) {
		t.Fatalf("PutUnless in View: %v", err)
	}
}

// A Tx kept after its function returned is done, also once later
// transactions reuse its state (txStates): it neither reads nor writes
// theirs.
func TestTxUsedAfterItsFunction(t *testing.T) {
	db := memDB(t, 64)
	var kept *Tx
	if err := db.Update(func(tx *Tx) error { kept = tx; return tx.Put([]byte("a"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if _, _, err := kept.Get([]byte("a"), nil); !errors.Is(err, ErrTxDone) {
			t.Fatalf("%s: Get: %v", when, err)
		}
		if err := kept.Put([]byte("b"), []byte("2")); !errors.Is(err, ErrTxDone) {
			t.Fatalf("%s: Put: %v", when, err)
		}
		if _, err := kept.PutUnless([]byte("b"), []byte("2"), func([]byte) bool { return false }); !errors.Is(err, ErrTxDone) {
			t.Fatalf("%s: PutUnless: %v", when, err)
		}
		if _, err := kept.Delete([]byte("a")); !errors.Is(err, ErrTxDone) {
			t.Fatalf("%s: Delete: %v", when, err)
		}
		if _, err := kept.Table(db); !errors.Is(err, ErrTxDone) {
			t.Fatalf("%s: Table: %v", when, err)
		}
	}
	check("after its Update")
	err := db.Update(func(tx *Tx) error {
		check("inside the next Update")
		_, _, err := tx.Get([]byte("a"), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.Get([]byte("b"), nil); ok {
		t.Fatal("a done Tx wrote")
	}
}

// A transaction is one log record: after a crash, each transaction is
// there whole (all its keys at the values it wrote).
func TestUpdateSurvivesCrashWhole(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CachePages: 64, Slots: 1 << 14, NoSync: true}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		err := db.Update(func(tx *Tx) error {
			for i := range 20 {
				if err := tx.Put(fmt.Appendf(nil, "key%02d", i), fmt.Appendf(nil, "round%03d", round)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	crash(t, db)
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !db.Recovery().Recovered {
		t.Fatal("the store did not recover")
	}
	for i := range 20 {
		v, _, _ := db.Get(fmt.Appendf(nil, "key%02d", i), nil)
		if string(v) != "round049" {
			t.Fatalf("key%02d = %q after recovery, want round049", i, v)
		}
	}
}

// The bank across a 3-node cluster: every node transfers with Update and
// reads every account with View at once; increments through Modify from
// every node lose none. The total never changes.
func TestClusterUpdateViewBank(t *testing.T) {
	cs := joinAll(t, clusterOpts(freePorts(t, 3), nil))
	defer closeAll(t, cs)
	const accounts, start = 12, 1000
	openAccounts(t, cs[0].Update, accounts, start, 600)
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	for g, c := range cs {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 60 {
				from, to := (g*5+i*7)%accounts, (g*3+i*11+1)%accounts
				if from == to {
					continue
				}
				err := c.Update(func(tx *Tx) error {
					a, _, err := tx.Get(account(from), nil)
					if err != nil {
						return err
					}
					b, _, err := tx.Get(account(to), nil)
					if err != nil {
						return err
					}
					tx.Put(account(from), binary.LittleEndian.AppendUint64(nil, u64(a)-1))
					return tx.Put(account(to), binary.LittleEndian.AppendUint64(nil, u64(b)+1))
				})
				if err != nil {
					t.Errorf("node %d: %v", g, err)
					return
				}
				if err := c.Modify([]byte("hits"), func(old []byte, found bool) ([]byte, bool, bool) {
					return binary.LittleEndian.AppendUint64(nil, u64(old)+1), true, true
				}); err != nil {
					t.Errorf("node %d: %v", g, err)
					return
				}
			}
		}()
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var total uint64
				err := c.View(func(tx *Tx) error {
					total = 0
					for i := range accounts {
						v, _, err := tx.Get(account(i), nil)
						if err != nil {
							return err
						}
						total += u64(v)
					}
					return nil
				})
				if err != nil {
					t.Errorf("node %d view: %v", g, err)
					return
				}
				if total != accounts*start {
					t.Errorf("node %d: a View saw %d, want %d", g, total, accounts*start)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	v, _, _ := cs[2].Get([]byte("hits"), nil)
	if u64(v) != 3*60 {
		t.Fatalf("hits = %d, want %d", u64(v), 3*60)
	}
}

// Many commits of 30 leaves each on a cache of 64 frames all complete
// (their latches are budgeted to half the cache: txbudget.go); a commit
// that alone would latch more than that is refused.
func TestCommitsShareTheCache(t *testing.T) {
	db := memDB(t, 64)
	for i := range 2000 {
		if err := db.Put(fmt.Appendf(nil, "k%05d", i), bytes.Repeat([]byte{'x'}, 200)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 20 {
				err := db.Update(func(tx *Tx) error {
					for i := range 30 {
						k := fmt.Appendf(nil, "k%05d", (g*97+round*31+i*61)%2000)
						if _, _, err := tx.Get(k, nil); err != nil {
							return err
						}
						if err := tx.Put(k, bytes.Repeat([]byte{byte('a' + g)}, 200)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	err := db.Update(func(tx *Tx) error {
		for i := range 40 {
			tx.Put(fmt.Appendf(nil, "k%05d", i*50), nil)
		}
		return nil
	})
	if !errors.Is(err, ErrTxTooLarge) {
		t.Fatalf("a commit of more leaves than half the cache: %v", err)
	}
}

// A transaction spans a node's tables: a move between a key of the default
// table and one of another table, from every node at once, keeps the sum
// that Views of both see; a KV of another store is refused.
func TestUpdateAcrossTables(t *testing.T) {
	cs := joinAll(t, clusterOpts(freePorts(t, 3), nil))
	defer closeAll(t, cs)
	if _, err := cs[0].Table("stock"); err != nil {
		t.Fatal(err)
	}
	err := cs[0].Update(func(tx *Tx) error {
		kv, _ := cs[0].Table("stock")
		st, err := tx.Table(kv)
		if err != nil {
			return err
		}
		if err := tx.Put([]byte("cash"), binary.LittleEndian.AppendUint64(nil, 500)); err != nil {
			return err
		}
		return st.Put([]byte("cash"), binary.LittleEndian.AppendUint64(nil, 500))
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kv, err := c.Table("stock")
			if err != nil {
				t.Error(err)
				return
			}
			for i := range 50 {
				err := c.Update(func(tx *Tx) error {
					st, err := tx.Table(kv)
					if err != nil {
						return err
					}
					a, _, err := tx.Get([]byte("cash"), nil)
					if err != nil {
						return err
					}
					b, _, err := st.Get([]byte("cash"), nil)
					if err != nil {
						return err
					}
					d := uint64(1 + (g+i)%3)
					tx.Put([]byte("cash"), binary.LittleEndian.AppendUint64(nil, u64(a)-d))
					return st.Put([]byte("cash"), binary.LittleEndian.AppendUint64(nil, u64(b)+d))
				})
				if err != nil {
					t.Error(err)
					return
				}
				// The reads inside the function are checked at its commit:
				// the sum holds once View returns.
				var a, b []byte
				err = c.View(func(tx *Tx) error {
					st, err := tx.Table(kv)
					if err != nil {
						return err
					}
					a, _, _ = tx.Get([]byte("cash"), nil)
					b, _, _ = st.Get([]byte("cash"), nil)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if u64(a)+u64(b) != 1000 {
					t.Errorf("a View saw %d + %d", u64(a), u64(b))
					return
				}
			}
		}()
	}
	wg.Wait()
	kv, _ := cs[1].Table("stock")
	a, _, _ := cs[2].Get([]byte("cash"), nil)
	b, _, _ := kv.Get([]byte("cash"), nil)
	if u64(a)+u64(b) != 1000 || u64(b) == 500 {
		t.Fatalf("default %d + stock %d after the moves", u64(a), u64(b))
	}
	other := memDB(t, 64)
	err = cs[0].Update(func(tx *Tx) error {
		_, err := tx.Table(other)
		return err
	})
	if !errors.Is(err, ErrTxTable) {
		t.Fatalf("a table of another store: %v", err)
	}
}

// An MSET of 10 new or small keys as resp runs it: PutUnless of each in
// one Update (go test -run '^$' -bench UpdateTenBlindPuts -benchmem .).
func BenchmarkUpdateTenBlindPuts(b *testing.B) {
	db, err := Open("", Options{InMemory: true, CachePages: 4096, Slots: 1 << 14})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	never := func([]byte) bool { return false }
	keys := make([][]byte, 100000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key:%012d", i)
	}
	val := []byte("xxx")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		err := db.Update(func(tx *Tx) error {
			for j := range 10 {
				k := keys[(i*7919+j*104729)%len(keys)]
				if _, err := tx.PutUnless(k, val, never); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
