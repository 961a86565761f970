package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBenchIO reads a small loaded store both ways, leaves it as it was
// (ycsb --skip-load still finds every record), and reports a corrupted
// page as the store's checksum error, from either pattern, instead of
// counting it or hanging.
func TestBenchIO(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI("ycsb", "--data", dir, "--records", "3000", "--threads", "1", "--duration", "50ms",
		"--warmup", "0s", "--cache", "256KiB", "--json")
	if code != 0 {
		t.Fatalf("ycsb load: exit %d: %s", code, errOut)
	}
	var loaded struct {
		StorePages uint64 `json:"store_pages"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &loaded); err != nil || loaded.StorePages < 20 {
		t.Fatalf("ycsb JSON: %v, %+v", err, loaded)
	}

	code, out, errOut = runCLI("bench", "io", "--data", dir, "--depth", "4", "--duration", "100ms", "--pattern", "all", "--json")
	if code != 0 {
		t.Fatalf("bench io: exit %d: %s", code, errOut)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	var res struct {
		Pages uint64  `json:"pages"`
		Depth int     `json:"depth"`
		Runs  []ioRun `json:"runs"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out)
	}
	if res.Pages != loaded.StorePages || res.Depth != 4 || len(res.Runs) != 3 {
		t.Fatalf("bench io: %+v, want %d pages, depth 4, three runs", res, loaded.StorePages)
	}
	for i, want := range []string{"depth", "workers", "poll"} {
		r := res.Runs[i]
		if r.Pattern != want || r.Reads == 0 || !(r.ReadsPerSec > 0) || !(r.CPUus > 0) {
			t.Errorf("run %d: %+v", i, r)
		}
	}
	if !strings.Contains(out, "--size="+itoa(loaded.StorePages*4096)) {
		t.Errorf("no fio line for the written pages:\n%s", out)
	}
	if code, _, errOut := runCLI("ycsb", "--data", dir, "--records", "3000", "--skip-load", "--duration", "20ms",
		"--warmup", "0s", "--cache", "256KiB"); code != 0 {
		t.Fatalf("ycsb --skip-load after bench io: exit %d: %s", code, errOut)
	}

	// Overwrite a leaf in the middle of the written region with garbage.
	f, err := os.OpenFile(filepath.Join(dir, "scalestore.db"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(i*7 + 1)
	}
	slot := loaded.StorePages / 2
	if _, err := f.WriteAt(junk, int64(slot+1)*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{"depth", "workers", "poll"} {
		code, _, errOut := runCLI("bench", "io", "--data", dir, "--depth", "4", "--duration", "2s", "--pattern", p)
		if code != 1 || !strings.Contains(errOut, "corrupt") || !strings.Contains(errOut, "slot "+itoa(slot)) {
			t.Errorf("--pattern %s on a corrupt page: exit %d, stderr %q", p, code, errOut)
		}
	}

	for _, args := range [][]string{
		{"--data", dir, "--depth", "0"},
		{"--data", dir, "--pattern", "sideways"},
		{"--data", filepath.Join(dir, "none")},
		{},
	} {
		if code, _, errOut := runCLI(append([]string{"bench", "io"}, args...)...); code != 2 || errOut == "" {
			t.Errorf("bench io %v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
