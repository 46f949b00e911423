package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/bench"
	"github.com/kvlease/kvlease/cmd/internal/cli"
	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/xfer"
)

// writeModelFiles writes a small llama model (the stories260K shape, random
// seeded weights, a context of 1,024 so that the demo's prompts fit) into
// dir: as a GGUF file with its vocabulary, and as a llama2.c checkpoint
// with its tokenizer.bin under another name.
func writeModelFiles(t *testing.T, dir string) (gguf, ckpt, tokenizer string) {
	t.Helper()
	c := llamatest.Shape260K
	c.MaxSeqLen = 1024
	w := llamatest.Random(c, 5, false)
	v := llamatest.SPMVocab(c.VocabSize)
	write := func(name string, f func(*bytes.Buffer) error) string {
		var buf bytes.Buffer
		if err := f(&buf); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	gguf = write("stories260k.gguf", func(b *bytes.Buffer) error {
		return llamatest.WriteGGUF(b, w, llamatest.GGUFOptions{Vocab: &v})
	})
	ckpt = write("stories260k.bin", func(b *bytes.Buffer) error { return llamatest.WriteLlama2C(b, w) })
	tokenizer = write("tok260k.bin", func(b *bytes.Buffer) error { return llamatest.WriteTokenizerBin(b, v.Tokens, v.Scores) })
	return gguf, ckpt, tokenizer
}

// TestModelFileFlags: up, demo and bench --scenario pass --model-file and
// --tokenizer-file to every engine they start (absolute paths, the
// demo's single reference engine included), and refuse a missing or
// unloadable file, a tokenizer without a model, and a model file for
// bench without --scenario, naming the flag.
func TestModelFileFlags(t *testing.T) {
	dir := t.TempDir()
	gguf, ckpt, tok := writeModelFiles(t, dir)
	junk := filepath.Join(dir, "junk.gguf")
	if err := os.WriteFile(junk, []byte("GGUF\x03\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"up"}, {"demo"}, {"bench", "--scenario", "none"}} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--tokenizer-file", tok}, "--tokenizer-file: goes with --model-file"},
			{[]string{"--model-file", filepath.Join(dir, "missing.gguf")}, "--model-file: open"},
			{[]string{"--model-file", junk}, "--model-file: "},
			{[]string{"--model-file", ckpt, "--tokenizer-file", filepath.Join(dir, "missing.bin")}, "--model-file: "},
		} {
			args := append(slices.Clone(cmd), tc.args...)
			code, _, stderr := runCmd(t, args...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want 1 and %q", args, code, stderr, tc.want)
			}
		}
	}
	if code, _, stderr := runCmd(t, "bench", "--url", "http://127.0.0.1:1", "--model-file", gguf); code != 1 || !strings.Contains(stderr, "--model-file: goes with --scenario") {
		t.Errorf("bench --url --model-file: exit %d, stderr %q", code, stderr)
	}

	// Relative paths reach the engines absolute.
	t.Chdir(dir)
	wantGGUF := []string{"--model-file", gguf}
	wantCkpt := []string{"--model-file", ckpt, "--tokenizer-file", tok}
	opt, what, err := parseUpFlags([]string{"--model-file", filepath.Base(gguf), "--serve-args", "--threads 1"}, io.Discard)
	if err != nil || !slices.Equal(opt.ExtraServeArgs, append(slices.Clone(wantGGUF), "--threads", "1")) || what != "model file "+gguf {
		t.Errorf("up: %v, %q, %v", opt.ExtraServeArgs, what, err)
	}
	o, err := parseDemoFlags([]string{"--model-file", filepath.Base(ckpt), "--tokenizer-file", filepath.Base(tok)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.clusterRun(xfer.PolicyLease).Cluster.ExtraServeArgs; !slices.Equal(got[len(got)-4:], wantCkpt) {
		t.Errorf("demo engines run with %v", got)
	}
	if got := o.model.serveArgs(); !slices.Equal(got, wantCkpt) {
		t.Errorf("demo's reference engine runs with %v", got)
	}
	fs := cli.NewFlagSet("bench", io.Discard)
	lc := addLocalClusterFlags(fs)
	if err := fs.Parse([]string{"--scenario", "none", "--model-file", filepath.Base(gguf), "--serve-args", "--threads 1"}); err != nil {
		t.Fatal(err)
	}
	cc, err := lc.config(bench.DefaultConfig(), map[string]bool{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cc.Cluster.ExtraServeArgs, append(append([]string{"--release-policy", "lease"}, wantGGUF...), "--threads", "1"); !slices.Equal(got, want) {
		t.Errorf("bench engines run with %v, want %v", got, want)
	}
}

// TestModelFileEndToEnd runs bench --scenario and the demo on a generated
// model file with the kvlease binary: real engines computing real KV, P/D
// outputs equal to the single engine's, nothing leaked.
func TestModelFileEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kvlease binary and runs local clusters on a model file")
	}
	bin := kvleaseBinary(t)
	gguf, ckpt, tok := writeModelFiles(t, t.TempDir())

	stdout, stderr, err := runBinary(t, bin, 3*time.Minute, "bench", "--scenario", "none", "--model-file", gguf,
		"--requests", "12", "--concurrency", "4", "--output-len", "8", "--kv-lease", "2s", "--progress", "none")
	if err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"local cluster up (model file " + gguf, "leases: granted 12", "0 at the end (0 leases)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bench output lacks %q:\n%s", want, stdout)
		}
	}

	stdout, stderr, err = runBinary(t, bin, 4*time.Minute, "demo", "--model-file", ckpt, "--tokenizer-file", tok,
		"--policies", "lease", "--requests", "16", "--concurrency", "4", "--kv-lease", "900ms", "--out", t.TempDir())
	if err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"model file " + ckpt, "decode0 killed", "OK: no block leaked"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
}
