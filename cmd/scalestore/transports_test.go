package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore"
)

// transportDocRow is one row of docs/transports.md's table.
type transportDocRow struct {
	cells  map[string]string // transport -> "yes", "rdma" or "no: reason"
	runBy  []string
	source string
}

func readTransportDoc(t *testing.T) map[string]transportDocRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "transports.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]transportDocRow{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		f := strings.Split(strings.Trim(line, "|"), "|")
		if len(f) != 2+len(transportKinds) {
			t.Fatalf("docs/transports.md: row %q has %d cells, want %d", line, len(f), 2+len(transportKinds))
		}
		entry := strings.Trim(strings.TrimSpace(f[0]), "`")
		row := transportDocRow{cells: map[string]string{}, source: line}
		for i, k := range transportKinds {
			row.cells[k] = strings.TrimSpace(f[1+i])
		}
		row.runBy = regexp.MustCompile(`Test\w+`).FindAllString(f[len(f)-1], -1)
		rows[entry] = row
	}
	return rows
}

// refusalCommand runs entry point entry with transport kind and returns
// its exit code and what it printed (Join: the error of a Join call).
func refusalCommand(t *testing.T, entry, kind string) (int, string) {
	t.Helper()
	var args []string
	switch entry {
	case "Join":
		c, err := scalestore.Join(scalestore.ClusterOptions{ID: 0, Peers: map[int]string{0: "127.0.0.1:1"}, Transport: kind})
		if err == nil {
			c.Close()
			return 0, ""
		}
		return 1, err.Error()
	case "node":
		args = []string{"node", "--id", "0", "--peers", "0=127.0.0.1:1", "--transport", kind}
	case "cluster":
		args = []string{"cluster", "--transport", kind, "--duration", "10ms"}
	case "crashtest --cluster":
		args = []string{"crashtest", "--cluster", "--data", t.TempDir(), "--rounds", "1", "--transport", kind}
	case "bench cluster":
		args = []string{"bench", "cluster", "--transports", kind, "--duration", "10ms"}
	default:
		t.Fatalf("no command for entry point %q", entry)
	}
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stderr.String()
}

// The table of docs/transports.md is the code's, every refusal is printed
// by its entry point as the table says, and the tests it names exist.
func TestTransportTable(t *testing.T) {
	doc := readTransportDoc(t)
	var entries []string
	for e := range doc {
		entries = append(entries, e)
	}
	slices.Sort(entries)
	want := slices.Clone(transportEntries)
	slices.Sort(want)
	if !slices.Equal(entries, want) {
		t.Fatalf("docs/transports.md lists entry points %q, the code %q", entries, want)
	}
	tests := testFunctions(t)
	for _, entry := range transportEntries {
		row := doc[entry]
		for _, kind := range transportKinds {
			code := entryTransports[entry][kind]
			var cell string
			switch code {
			case "":
				cell = "yes"
			case rdmaOnly:
				cell = "rdma"
			default:
				cell = "no: " + code
			}
			if row.cells[kind] != cell {
				t.Errorf("%s over %s: docs/transports.md says %q, the code %q", entry, kind, row.cells[kind], cell)
			}
			err := checkTransport(entry, kind)
			if err == nil {
				continue
			}
			exit, out := refusalCommand(t, entry, kind)
			if exit == 0 || !strings.Contains(out, err.Error()) {
				t.Errorf("%s over %s: exit %d, printed %q: want the refusal %q", entry, kind, exit, out, err)
			}
		}
		if len(row.runBy) == 0 {
			t.Errorf("%s: docs/transports.md names no test that runs it", entry)
		}
		for _, name := range row.runBy {
			if !tests[name] {
				t.Errorf("%s: docs/transports.md names %s, which no test file defines", entry, name)
			}
		}
	}
	// Join's row is what the library says it takes in this build.
	var join []string
	for _, kind := range transportKinds {
		if checkTransport("Join", kind) == nil {
			join = append(join, kind)
		}
	}
	if got := scalestore.Transports(); !slices.Equal(got, join) {
		t.Errorf("scalestore.Transports() = %q, the table's Join row in this build %q", got, join)
	}
	// A transport no entry point knows is refused with the list.
	if exit, out := refusalCommand(t, "node", "carrier-pigeon"); exit == 0 || !strings.Contains(out, "want one of tcp, shm, auto, ibverbs") {
		t.Errorf("node over an unknown transport: exit %d, %q", exit, out)
	}
}

// testFunctions lists the Test functions of every test file of the module.
func testFunctions(t *testing.T) map[string]bool {
	t.Helper()
	found := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err := filepath.WalkDir(filepath.Join("..", ".."), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bench-data") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
