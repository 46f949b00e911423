package kvlease_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers orders the module's packages from the bottom up
// (docs/design.md, "Packages"). A package may import packages of its own
// layer or of a layer below, never one above: the model loaders do not
// know the HTTP API, the cores do not know their drivers, nothing below the
// tools knows them. A new package must be placed.
var layers = []layer{
	{"foundations", []string{"clock", "tokenizer", "tokenizer/bpe", "chat", "model/constrain",
		"internal/race", "internal/idtable", "internal/promtext", "internal/tlsfiles", "internal/kvleasebin", "internal/e2e", "internal/plainsock", "internal/refused",
		"bench/stats", "internal/chaos/netem", "httpserver", "httpserver/httpservertest"}},
	{"the pool and the wire", []string{"kvblock", "wire"}},
	{"models", []string{"model", "model/synth", "model/llama", "model/gguf", "model/llama2c", "model/llamafile",
		"internal/llamatest"}},
	{"cores", []string{"sched", "xfer", "offload", "transport", "transport/memnet", "proxy/route", "faultapi"}},
	{"the engine", []string{"engine"}},
	{"drivers", []string{"node", "transport/tcp", "offload/tier", "sim", "kvevents", "kvevents/kveventstest"}},
	{"the HTTP API's types", []string{"openai"}},
	{"HTTP edges", []string{"httpapi", "metrics", "proxy"}},
	{"the serving commands", []string{"cmd/internal/cli", "cmd/internal/clitest"}},
	{"tools", []string{"localcluster", "bench", "internal/chaos"}},
	{"the binaries and end-to-end tests", []string{"cmd/kvlease", "cmd/kvlease-server", "internal/e2e/api", "internal/e2e/pd",
		"internal/e2e/scenarios"}},
}

// httpapiImports are the only packages of the module the HTTP API of an
// engine may import: it talks to the engine through node's API, never to
// the transfer, scheduling, pool or wire cores below it.
var httpapiImports = map[string]string{
	"node":            "the engine's API: Start, Abort, Stream, the P/D hand-off (node.Pull, node.Lease)",
	"engine":          "the values node's API carries: Request, Output, AddResult, AbortResult, Config",
	"model":           "a request's sampling parameters and an output's logprobs (engine.Request.Sampling)",
	"model/constrain": "tool calls parsed out of generated text",
	"openai":          "the API's types, parser and encoders",
	"chat":            "chat templates rendered for chat requests",
	"tokenizer":       "the default tokenizer and stop strings on detokenized text",
	"metrics":         "request latencies into vLLM's metrics",
	"clock":           "instants of arrival and tokens",
	"faultapi":        "the fault-injection API it serves (specs, registry, decisions)",
}

type layer = struct {
	name string
	pkgs []string
}

func TestNoUpwardImports(t *testing.T) {
	for _, v := range layeringViolations(t, ".", layers) {
		t.Error(v)
	}
	module := modulePath(t, ".")
	for _, imp := range loadPackage(t, "httpapi", nil).imports {
		if dep, ok := strings.CutPrefix(imp, module+"/"); ok && httpapiImports[dep] == "" {
			t.Errorf("httpapi imports %s: it reaches the engine through node's API only (httpapiImports)", dep)
		}
	}
}

// layeringViolations lists every package of the module at root that is in
// no layer, and every import of a package of a layer above the importer's.
func layeringViolations(t *testing.T, root string, ls []layer) []string {
	t.Helper()
	module := modulePath(t, root)
	at := map[string]int{}
	var out []string
	for i, l := range ls {
		for _, p := range l.pkgs {
			if _, dup := at[p]; dup {
				out = append(out, fmt.Sprintf("%s is placed twice", p))
			}
			at[p] = i
		}
	}
	for _, d := range packageDirs(t, root) {
		li, ok := at[d]
		if !ok {
			if d != "." {
				out = append(out, fmt.Sprintf("package %s is in no layer: place it in layers (layering_test.go)", d))
			}
			continue
		}
		for _, imp := range loadPackage(t, filepath.Join(root, filepath.FromSlash(d)), nil).imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if lj, ok := at[dep]; ok && lj > li {
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s), a layer above it", d, ls[li].name, dep, ls[lj].name))
			}
		}
	}
	return out
}

// The check finds an import of a layer above, and a package placed nowhere.
func TestLayeringCheckCatchesUpwardImport(t *testing.T) {
	root := writeTree(t, map[string]string{
		"low/low.go":       "package low\n\nimport _ \"example.com/m/high\"\n",
		"high/high.go":     "package high\n\nimport _ \"example.com/m/side\"\n",
		"side/side.go":     "package side\n",
		"nowhere/where.go": "package nowhere\n",
	})
	got := layeringViolations(t, root, []layer{{"bottom", []string{"low", "side"}}, {"top", []string{"high"}}})
	want := []string{
		"low (bottom) imports high (top), a layer above it",
		"package nowhere is in no layer: place it in layers (layering_test.go)",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
