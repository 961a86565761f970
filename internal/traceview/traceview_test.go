package traceview

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func sample() Trace {
	return Trace{Title: "exclusive-conflict </script><b>", About: "node 1 asks", Nodes: 3, Watch: "page 0:0, directory node 0",
		Steps: []Step{
			{At: 2300, From: 1, To: 0, Label: "Request X", State: "X owner=1 epoch=1"},
			{At: 4600, From: 0, To: 1, Label: "Forward X fetch-from=2", State: "X owner=1 epoch=1"},
			{At: 6900, From: 1, To: 2, Label: "Transfer X", State: "X owner=1 epoch=1"},
			{At: 9560, From: 2, To: 1, Label: "TransferReply X </script>", Page: true, State: "X owner=1 epoch=1"},
		},
		Notes: []string{"at rest: X owner=1"}}
}

func TestWriteIsSelfContained(t *testing.T) {
	var b strings.Builder
	if err := Write(&b, sample()); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, bad := range []string{"<link", " src=", "@import", "url("} {
		if strings.Contains(html, bad) {
			t.Errorf("the page holds %q: it must load nothing", bad)
		}
	}
	for _, u := range regexp.MustCompile(`https?://[^"'\s]*`).FindAllString(html, -1) {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("the page names %s: only the SVG namespace may appear", u)
		}
	}
	// A label cannot end the script early, and the title is escaped.
	if strings.Count(html, "</script>") != 1 || !strings.Contains(html, "exclusive-conflict &lt;/script&gt;&lt;b&gt;") {
		t.Error("a label or the title escaped into the markup")
	}
}

func TestWriteRefusesBadTraces(t *testing.T) {
	var b strings.Builder
	tr := sample()
	tr.Steps = nil
	if err := Write(&b, tr); err == nil {
		t.Error("a trace without steps was written")
	}
	tr = sample()
	tr.Steps[2].To = 3
	if err := Write(&b, tr); err == nil || !strings.Contains(err.Error(), "step 2") {
		t.Errorf("a step to a node outside the trace: %v", err)
	}
	tr = sample()
	tr.Nodes = 0
	if err := Write(&b, tr); err == nil {
		t.Error("a trace of no nodes was written")
	}
}

// browser finds a headless-capable Chromium or Chrome on PATH.
func browser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// In a real browser: the page loads without a console error, and pressing
// the right arrow moves the highlighted message from step 0 to step 1
// (the page's ?selftest presses it and writes what happened into the DOM).
func TestViewerInHeadlessBrowser(t *testing.T) {
	bin := browser()
	if bin == "" {
		t.Skip("no chromium or chrome on PATH (.ci/run installs Debian's chromium)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, sample()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0",
		"--virtual-time-budget=5000", "--dump-dom", "file://"+path+"?selftest")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	dom := string(out)
	if !strings.Contains(dom, "selftest highlight 0 -&gt; 1") && !strings.Contains(dom, "selftest highlight 0 -> 1") {
		t.Fatalf("pressing the right arrow did not move the highlight from step 0 to step 1; the DOM:\n%s\nstderr:\n%s", dom, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			t.Errorf("the browser's console: %s", line)
		}
	}
}
