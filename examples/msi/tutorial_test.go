package msi_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// normalize drops a line's comment and collapses its spaces, so that a
// snippet's alignment and notes do not count.
func normalize(line string) string {
	if i := strings.Index(line, "//"); i >= 0 {
		line = line[:i]
	}
	return strings.Join(strings.Fields(line), " ")
}

// The tutorial cannot drift from the code: every line of its Go snippets
// (but the elisions, "...") is a line of examples/msi, protocolapi or the
// list of registrations.
func TestTutorialQuotesTheCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/new-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]bool{}
	for _, dir := range []string{".", "../../protocolapi", "../../protocols"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				code[normalize(line)] = true
			}
		}
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("%d Go snippets in the tutorial", len(blocks))
	}
	checked := 0
	for _, b := range blocks {
		for _, line := range strings.Split(b[1], "\n") {
			n := normalize(line)
			if n == "" || strings.Contains(line, "...") {
				continue
			}
			checked++
			if !code[n] {
				t.Errorf("the tutorial quotes %q, which is no line of the code", strings.TrimSpace(line))
			}
		}
	}
	t.Logf("%d quoted lines checked", checked)
}
