package kvlease_test

import (
	"fmt"
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
)

// pure lists the packages that must do no I/O, read no clock, use no global
// randomness and start no goroutine (docs/design.md, "Pure cores, thin edges"),
// neither themselves nor through any package of the module they import.
// A value lists files of the package that are edges (engine/node.go): they
// are not checked, and their imports are not followed.
var pure = map[string][]string{
	"clock":              nil,
	"kvblock":            nil,
	"sched":              nil,
	"model":              nil,
	"model/synth":        nil,
	"model/constrain":    nil,
	"model/llama":        nil,
	"model/gguf":         nil,
	"model/llama2c":      nil,
	"internal/llamatest": nil,
	"engine":             nil,
	"xfer":               nil,
	"wire":               nil,
	"offload":            nil,
	"openai":             nil,
	"chat":               nil,
	"tokenizer":          nil,
	"tokenizer/bpe":      nil,
	"transport":          nil,
	"transport/memnet":   nil,
	"sim":                nil,
	"proxy/route":        nil,
	"bench/stats":        nil,
	"internal/race":      nil,
	"internal/idtable":   nil,
	"faultapi":           nil,
	// netem: the Queue and Fault are the core; forward.go drives them
	// with goroutines, the wall clock and devices.
	"internal/chaos/netem": {"forward.go"},
}

// edge lists the packages allowed to do I/O.
var edge = map[string]bool{
	"cmd/kvlease": true,
	// the serving binary, and the command line both binaries share
	// (serve, proxy, flags, environment); clitest: its tests' helpers.
	"cmd/kvlease-server":        true,
	"cmd/internal/cli":          true,
	"cmd/internal/clitest":      true,
	"httpapi":                   true,
	"httpserver":                true, // the HTTP/1.1 server
	"httpserver/httpservertest": true,
	"metrics":                   true,
	"proxy":                     true,
	"transport/tcp":             true,
	"offload/tier":              true,
	"bench":                     true,
	"localcluster":              true,
	"node":                      true,
	"internal/e2e/api":          true,
	"internal/chaos":            true,
	"model/llamafile":           true,
	// kvevents: the KV events publisher (sockets, goroutines);
	// kveventstest: its test clients.
	"kvevents":              true,
	"kvevents/kveventstest": true,
	// kvleasebin: builds cmd/kvlease for the tests that run it; e2e:
	// those tests' waits and HTTP posts.
	"internal/kvleasebin": true,
	"internal/e2e":        true,
	// refused: a loopback port bound and never listened on, for the tests
	// that need a dead engine (a socket held for the test's life).
	"internal/refused": true,
	// tlsfiles: TLS configurations from PEM files, reloaded on change.
	"internal/tlsfiles": true,
	// promtext: reads the Prometheus text of a scrape from an io.Reader
	// with expfmt (whose dependencies are not checked here); only the
	// proxy and bench, both edges, use it.
	"internal/promtext":  true,
	"internal/plainsock": true,
}

// forbiddenImports are the standard-library packages a pure package may not
// import, directly or through a package of the module. "net/..." and
// "os/..." are forbidden as prefixes too.
//
// context is forbidden: a context carries cancellation that arrives
// asynchronously (Done is a channel closed by another goroutine or by a
// timer) and WithTimeout/WithDeadline read the wall clock. A core learns of
// cancellation as an input (an abort) at a given instant; as in etcd's raft,
// only the edge that drives it takes a context.
var forbiddenImports = map[string]string{
	"context":     "a core takes cancellations as inputs; only its edge takes a context",
	"net":         "network I/O belongs to an edge",
	"os":          "OS access belongs to an edge",
	"sync":        "a core is single-threaded",
	"sync/atomic": "a core is single-threaded",
	"syscall":     "system calls belong to an edge",
	"math/rand":   "use an injected *rand.Rand from math/rand/v2",
	"crypto/rand": "use an injected *rand.Rand",
	"io/ioutil":   "file I/O belongs to an edge",
	"log":         "cores log through an injected log/slog logger",
}

// allowedThirdParty are the packages outside the module and the standard
// library that a pure package may reach. Their insides are not checked, so
// each one is listed with the reason it is known to do no I/O.
var allowedThirdParty = map[string]string{
	"github.com/cespare/xxhash/v2": "a hash function over byte slices",
	"golang.org/x/sys/cpu":         "reads CPU features once at init (imported by model/llama and model/synth on amd64 only, where that is CPUID); no I/O",
	"github.com/ardanlabs/jinja":   "a Jinja template engine over in-memory values (chat); its one clock read, the builtin strftime_now, is shadowed by chat with the render's clock",
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
	dirs := packageDirs(t, ".")
	for _, dir := range dirs {
		if _, isPure := pure[dir]; !isPure && !edge[dir] {
			t.Errorf("package %s is neither pure nor edge: classify it in purity_test.go", dir)
		}
	}
	for dir, edgeFiles := range pure {
		if edge[dir] {
			t.Errorf("package %s is listed both as pure and as edge", dir)
		}
		if !slices.Contains(dirs, dir) {
			t.Errorf("purity_test.go lists pure package %s, which does not exist: remove it", dir)
			continue
		}
		for _, f := range edgeFiles {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("purity_test.go lists edge file %s/%s, which does not exist: remove it", dir, f)
			}
		}
	}
	for dir := range edge {
		if !slices.Contains(dirs, dir) {
			t.Errorf("purity_test.go lists edge package %s, which does not exist: remove it", dir)
		}
	}
	for _, v := range purityViolations(t, ".", pure) {
		t.Error(v)
	}
}

// packageDirs lists, slash-separated and relative to root, every directory
// below root holding a non-test .go file.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "out") {
				return filepath.SkipDir
			}
			// A directory with its own go.mod (deploy/, interop/) is
			// another module: its packages are not this module's.
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel != "." {
				seen[filepath.ToSlash(rel)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// pkgInfo is what the check needs of one package of the module: the
// violations in its own (non-test, non-edge) files and what those files import.
type pkgInfo struct {
	violations []string
	imports    []string // import paths, sorted, deduplicated
}

// purityViolations checks every package of purePkgs (directories relative to
// root, the root of a module) and every package of the module it reaches
// through the imports of its non-test, non-edge files. A reached package that
// is itself listed as pure is reported on its own, so its violations are not
// repeated for each package reaching it.
func purityViolations(t *testing.T, root string, purePkgs map[string][]string) []string {
	t.Helper()
	module := modulePath(t, root)
	infos := map[string]*pkgInfo{}
	load := func(dir string) *pkgInfo {
		if in, ok := infos[dir]; ok {
			return in
		}
		in := loadPackage(t, filepath.Join(root, filepath.FromSlash(dir)), purePkgs[dir])
		infos[dir] = in
		return in
	}
	var out []string
	pkgs := make([]string, 0, len(purePkgs))
	for p := range purePkgs {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		out = append(out, load(p).violations...)
		// Depth-first over the module's import graph; via[d] is the chain
		// of packages by which p reaches d, for the message.
		via := map[string][]string{p: {p}}
		stack := []string{p}
		for len(stack) > 0 {
			d := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, imp := range load(d).imports {
				switch {
				case imp == module || strings.HasPrefix(imp, module+"/"):
					dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
					if _, seen := via[dep]; seen {
						continue
					}
					via[dep] = append(slices.Clone(via[d]), dep)
					stack = append(stack, dep)
					if _, isPure := purePkgs[dep]; isPure {
						continue
					}
					for _, v := range load(dep).violations {
						out = append(out, fmt.Sprintf("pure package %s reaches %s through %s: %s",
							p, dep, strings.Join(via[dep], " → "), v))
					}
				case !strings.Contains(strings.Split(imp, "/")[0], "."):
					// Standard library: checked at the importing file.
				default:
					if _, ok := allowedThirdParty[imp]; !ok {
						out = append(out, fmt.Sprintf("pure package %s reaches third-party %q through %s: "+
							"list it in allowedThirdParty with the reason it does no I/O, or move the use to an edge",
							p, imp, strings.Join(via[d], " → ")))
					}
				}
			}
		}
	}
	return out
}

// modulePath reads the module path from root/go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatalf("%s/go.mod names no module", root)
	return ""
}

// loadPackage parses the non-test files of dir other than edgeFiles (all of
// them, whatever their build constraints: a file under a build tag must be
// pure too) and lists their imports and every way they break purity.
func loadPackage(t *testing.T, dir string, edgeFiles []string) *pkgInfo {
	t.Helper()
	in := &pkgInfo{}
	errorf := func(format string, args ...any) { in.violations = append(in.violations, fmt.Sprintf(format, args...)) }
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || slices.Contains(edgeFiles, name) {
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
			if !slices.Contains(in.imports, p) {
				in.imports = append(in.imports, p)
			}
			why, bad := forbiddenImports[p]
			switch {
			case bad:
			case strings.HasPrefix(p, "net/"):
				why, bad = "network I/O belongs to an edge", true
			case strings.HasPrefix(p, "os/"):
				why, bad = "OS access belongs to an edge", true
			}
			if bad {
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
	slices.Sort(in.imports)
	return in
}

// writeTree writes files (slash-separated path → content) below a new
// temporary directory, with a go.mod for module example.com/m, and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.26\n"
	for name, src := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestPurityCheckCatchesViolations(t *testing.T) {
	cases := map[string]string{
		"net":         "import \"net\"\nvar _ net.Conn",
		"os":          "import \"os\"\nvar _ = os.Args",
		"os/exec":     "import \"os/exec\"\nvar _ = exec.Command",
		"sync":        "import \"sync\"\nvar _ sync.Mutex",
		"context":     "import \"context\"\nvar _ context.Context",
		"time.Now":    "import \"time\"\nvar _ = time.Now()",
		"time.Sleep":  "import tm \"time\"\nfunc f() { tm.Sleep(1) }",
		"rand":        "import \"math/rand/v2\"\nvar _ = rand.IntN(3)",
		"goroutine":   "func f() { go f() }",
		"net/http":    "import \"net/http\"\nvar _ http.Handler",
		"third-party": "import \"example.org/x/net\"\nvar _ = net.Dial",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			src := "package p\n" + body + "\n"
			root := writeTree(t, map[string]string{"p/p.go": src})
			if v := purityViolations(t, root, map[string][]string{"p": nil}); len(v) == 0 {
				t.Errorf("no violation found in:\n%s", src)
			}
		})
	}
	t.Run("clean", func(t *testing.T) {
		src := "package p\nimport (\"time\"; \"math/rand/v2\"; \"encoding/json\"; xx \"github.com/cespare/xxhash/v2\")\n" +
			"var d time.Duration\nvar r = rand.New(rand.NewPCG(1, 2))\nvar _ = json.Marshal\nvar _ = xx.Sum64\n"
		root := writeTree(t, map[string]string{"p/p.go": src})
		if v := purityViolations(t, root, map[string][]string{"p": nil}); len(v) != 0 {
			t.Errorf("clean file flagged: %v", v)
		}
	})
}

// TestPurityCheckIsTransitive builds a module where pure package p imports
// q, q imports r, and r imports net: p reaches net without importing it.
func TestPurityCheckIsTransitive(t *testing.T) {
	files := func() map[string]string {
		return map[string]string{
			"p/p.go": "package p\nimport \"example.com/m/q\"\nvar _ = q.Q\n",
			"q/q.go": "package q\nimport \"example.com/m/r\"\nvar Q = r.R\n",
			"r/r.go": "package r\nimport \"net\"\nvar R = net.Dial\n",
		}
	}
	t.Run("net through two packages", func(t *testing.T) {
		root := writeTree(t, files())
		v := purityViolations(t, root, map[string][]string{"p": nil})
		if len(v) != 1 || !strings.Contains(v[0], `"net"`) || !strings.Contains(v[0], "p → q → r") {
			t.Errorf("violations = %q, want one naming net and the chain p → q → r", v)
		}
	})
	t.Run("time.Now through a package", func(t *testing.T) {
		fs := files()
		fs["r/r.go"] = "package r\nimport \"time\"\nfunc R() time.Time { return time.Now() }\n"
		root := writeTree(t, fs)
		if v := purityViolations(t, root, map[string][]string{"p": nil}); len(v) != 1 || !strings.Contains(v[0], "time.Now") {
			t.Errorf("violations = %q, want one naming time.Now", v)
		}
	})
	t.Run("third-party through a package", func(t *testing.T) {
		fs := files()
		fs["r/r.go"] = "package r\nimport \"example.org/x/net\"\nvar R = net.Dial\n"
		root := writeTree(t, fs)
		if v := purityViolations(t, root, map[string][]string{"p": nil}); len(v) != 1 || !strings.Contains(v[0], "example.org/x/net") {
			t.Errorf("violations = %q, want one naming example.org/x/net", v)
		}
	})
	t.Run("edge file not followed", func(t *testing.T) {
		fs := files()
		fs["p/p.go"] = "package p\n"
		fs["p/node.go"] = "package p\nimport \"example.com/m/q\"\nvar _ = q.Q\n"
		root := writeTree(t, fs)
		if v := purityViolations(t, root, map[string][]string{"p": {"node.go"}}); len(v) != 0 {
			t.Errorf("edge file's imports followed: %q", v)
		}
	})
	t.Run("reached package's edge file not followed", func(t *testing.T) {
		fs := files()
		fs["q/q.go"] = "package q\nvar Q = 1\n"
		fs["q/node.go"] = "package q\nimport \"example.com/m/r\"\nvar _ = r.R\n"
		root := writeTree(t, fs)
		if v := purityViolations(t, root, map[string][]string{"p": nil, "q": {"node.go"}}); len(v) != 0 {
			t.Errorf("edge file's imports followed: %q", v)
		}
	})
	t.Run("pure chain", func(t *testing.T) {
		fs := files()
		fs["r/r.go"] = "package r\nimport \"time\"\nvar R time.Duration\n"
		root := writeTree(t, fs)
		if v := purityViolations(t, root, map[string][]string{"p": nil}); len(v) != 0 {
			t.Errorf("pure chain flagged: %q", v)
		}
	})
}
