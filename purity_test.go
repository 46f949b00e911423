package kvlease_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pure lists the packages that must do no I/O, read no clock, use no global
// randomness and start no goroutine (DESIGN.md, "pure cores, thin edges").
// A value lists files of the package that are edges (engine/node.go).
var pure = map[string][]string{
	"clock":            nil,
	"config":           nil,
	"kvblock":          nil,
	"sched":            nil,
	"model":            nil,
	"model/synth":      nil,
	"engine":           {"node.go"},
	"xfer":             nil,
	"wire":             nil,
	"offload":          nil,
	"openai":           nil,
	"tokenizer":        nil,
	"transport":        nil,
	"transport/memnet": nil,
	"sim":              nil,
	"proxy/route":      nil,
	"bench/stats":      nil,
}

// edge lists the packages allowed to do I/O.
var edge = map[string]bool{
	"cmd/kvlease":    true,
	"httpapi":        true,
	"metrics":        true,
	"proxy":          true,
	"transport/tcp":  true,
	"offload/tier":   true,
	"bench":          true,
	"cluster":        true,
	"internal/e2e":   true,
	"internal/build": true,
}

var forbiddenImports = map[string]string{
	"net":         "network I/O belongs to an edge",
	"os":          "OS access belongs to an edge",
	"os/exec":     "processes belong to an edge",
	"os/signal":   "signals belong to an edge",
	"sync":        "a core is single-threaded",
	"sync/atomic": "a core is single-threaded",
	"syscall":     "system calls belong to an edge",
	"math/rand":   "use an injected *rand.Rand from math/rand/v2",
	"crypto/rand": "use an injected *rand.Rand",
	"io/ioutil":   "file I/O belongs to an edge",
	"log":         "cores log through an injected log/slog logger",
}

var forbiddenTime = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "AfterFunc": true, "NewTimer": true,
	"NewTicker": true, "Since": true, "Until": true, "Tick": true,
}

// allowedRandV2 are the math/rand/v2 identifiers that do not touch the
// global source.
var allowedRandV2 = map[string]bool{
	"New": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
	"Rand": true, "PCG": true, "ChaCha8": true, "Source": true, "Zipf": true,
}

func TestPurePackagesDoNoIO(t *testing.T) {
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "out") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.ToSlash(filepath.Dir(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		if dir == "." {
			continue
		}
		_, isPure := pure[dir]
		if !isPure && !edge[dir] {
			t.Errorf("package %s is neither pure nor edge: classify it in purity_test.go", dir)
		}
		if isPure {
			for _, v := range violations(t, dir, pure[dir]) {
				t.Error(v)
			}
		}
	}
}

// violations lists every way the non-test files of dir break purity.
func violations(t *testing.T, dir string, edgeFiles []string) []string {
	var out []string
	errorf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		skip := false
		for _, f := range edgeFiles {
			skip = skip || f == name
		}
		if skip {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := map[string]string{} // local name → import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if why, bad := forbiddenImports[p]; bad || strings.HasPrefix(p, "net/") {
				if why == "" {
					why = "network I/O belongs to an edge"
				}
				errorf("%s: pure package imports %q: %s", path, p, why)
			}
			n := p[strings.LastIndex(p, "/")+1:]
			if p == "math/rand/v2" {
				n = "rand"
			}
			if imp.Name != nil {
				n = imp.Name.Name
			}
			local[n] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				errorf("%s: pure package starts a goroutine", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				id, ok := n.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch local[id.Name] {
				case "time":
					if forbiddenTime[n.Sel.Name] {
						errorf("%s: pure package calls time.%s: take a clock.Instant", fset.Position(n.Pos()), n.Sel.Name)
					}
				case "math/rand/v2":
					if !allowedRandV2[n.Sel.Name] {
						errorf("%s: pure package uses the global rand.%s: inject a *rand.Rand", fset.Position(n.Pos()), n.Sel.Name)
					}
				}
			}
			return true
		})
	}
	return out
}

func TestPurityCheckCatchesViolations(t *testing.T) {
	cases := map[string]string{
		"net":        "import \"net\"\nvar _ net.Conn",
		"os":         "import \"os\"\nvar _ = os.Args",
		"sync":       "import \"sync\"\nvar _ sync.Mutex",
		"time.Now":   "import \"time\"\nvar _ = time.Now()",
		"time.Sleep": "import tm \"time\"\nfunc f() { tm.Sleep(1) }",
		"rand":       "import \"math/rand/v2\"\nvar _ = rand.IntN(3)",
		"goroutine":  "func f() { go f() }",
		"net/http":   "import \"net/http\"\nvar _ http.Handler",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package p\n" + body + "\n"
			if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if v := violations(t, dir, nil); len(v) == 0 {
				t.Errorf("no violation found in:\n%s", src)
			}
		})
	}
	t.Run("clean", func(t *testing.T) {
		dir := t.TempDir()
		src := "package p\nimport (\"time\"; \"math/rand/v2\")\nvar d time.Duration\nvar r = rand.New(rand.NewPCG(1, 2))\n"
		if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if v := violations(t, dir, nil); len(v) != 0 {
			t.Errorf("clean file flagged: %v", v)
		}
	})
}
