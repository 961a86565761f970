package protocols

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocolapi"
)

// host is ScaleStore's registered name, which the rule leaves out: it is
// the product itself, whose name is the module's, the command's and the
// RESP server's, so a literal cannot tell its protocol from the product.
const host = "scalestore"

// naming is a string literal that names a protocol outside its packages.
type naming struct {
	file string // relative to the module's root
	text string
}

// namingViolations scans the non-test Go files of the module at root (not
// nested modules) and returns every string literal that is a registered
// name, or a name and "-" (a prefix to dispatch on), in a file outside
// that protocol's Dirs and list.go.
func namingViolations(t *testing.T, root string, es []Entry) []naming {
	t.Helper()
	dirs := map[string][]string{}
	for _, e := range es {
		if e.Protocol.Name != host {
			dirs[e.Protocol.Name] = append(dirs[e.Protocol.Name], e.Dirs...)
		}
	}
	home := func(file, name string) bool {
		for _, d := range dirs[name] {
			if file == d || strings.HasPrefix(file, d+"/") {
				return true
			}
		}
		return file == "protocols/list.go"
	}
	var out []naming
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own (bench/)
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			name := strings.TrimSuffix(v, "-")
			if _, registered := dirs[name]; registered && !home(rel, name) {
				out = append(out, naming{rel, fset.Position(lit.Pos()).String() + ": " + lit.Value + " names protocol " + name +
					" outside its packages " + strings.Join(dirs[name], ", ") + " and protocols/list.go"})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNamesStayHome: no file names a protocol outside the protocol's own
// packages and the one list of registrations (issue 47), so that the CLI
// and the Makefile find every protocol through the registry: a new
// protocol adds its package and a line to list.go, and nothing else.
func TestNamesStayHome(t *testing.T) {
	es := Entries()
	for _, e := range es {
		if e.Protocol.Name != host && len(e.Dirs) == 0 {
			t.Errorf("%s declares no directories of its own", e.Protocol.Name)
		}
		for _, d := range e.Dirs {
			if st, err := os.Stat(filepath.Join("..", d)); err != nil || !st.IsDir() {
				t.Errorf("%s: directory %q: %v", e.Protocol.Name, d, err)
			}
		}
	}
	for _, v := range namingViolations(t, "..", es) {
		t.Error(v.text)
	}
}

// The scan finds a name used to dispatch (a comparison, a prefix, a case)
// outside the protocol's packages, and not inside them or in list.go.
func TestNamingViolationsFindsDispatch(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cmd/tool/main.go", `package main
import "strings"
func pick(p string) bool { return p == "selcc" || strings.HasPrefix(p, "nam-fg-") }
func kind(p string) int {
	switch p {
	case "gam-tso":
		return 1
	}
	return 0
}
`)
	write("cmd/tool/main_test.go", `package main
var _ = "selcc"
`)
	write("protocol/selcc/x.go", `package selcc
const Name = "selcc"
`)
	write("protocols/list.go", `package protocols
var names = []string{"selcc", "gam-tso", "scalestore"}
`)
	write("nested/go.mod", "module nested\n")
	write("nested/x.go", `package nested
var _ = "selcc"
`)
	write("docs/text.go", `package docs
const usage = "runs selcc and nam-fg"
`)
	es := []Entry{{Protocol: pr("selcc"), Dirs: []string{"protocol/selcc"}}, {Protocol: pr("nam-fg"), Dirs: []string{"index"}},
		{Protocol: pr("gam-tso"), Dirs: []string{"gam"}}, {Protocol: pr("scalestore")}}
	var got []string
	for _, v := range namingViolations(t, root, es) {
		if v.file != "cmd/tool/main.go" {
			t.Errorf("%s: not a dispatch outside the protocol's packages: %s", v.file, v.text)
		}
		got = append(got, v.text)
	}
	for _, want := range []string{`main.go:3:`, `"selcc" names protocol selcc`, `"nam-fg-" names protocol nam-fg`, `main.go:6:`, `"gam-tso" names protocol gam-tso`} {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, want) }) {
			t.Errorf("the scan missed %s: %q", want, got)
		}
	}
	if len(got) != 3 {
		t.Fatalf("want exactly the three dispatches in cmd/tool/main.go, got %q", got)
	}
}

func pr(name string) protocolapi.Protocol { return protocolapi.Protocol{Name: name} }
