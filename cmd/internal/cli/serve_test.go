package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/cmd/internal/clitest"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/xfer"
)

func TestServeFlagsAreValidated(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("tiny"), 0o600)
	t.Setenv(secretEnv, "")
	t.Setenv("KVLEASE_ADMIN_KEY", "")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--role", "chef"}, "--role"},
		{[]string{"--kv-peers", "10.0.0.0/33"}, "--kv-peers \"10.0.0.0/33\""},
		{[]string{"--kv-peers", " , "}, "leave --kv-peers unset"},
		{[]string{"--ssl-certfile", "c.pem"}, "--ssl-certfile and --ssl-keyfile: give both"},
		{[]string{"--ssl-cert-reqs", "2"}, "need HTTPS"},
		{[]string{"--ssl-cert-reqs", "5", "--ssl-certfile", "c", "--ssl-keyfile", "k"}, "--ssl-cert-reqs 5"},
		{[]string{"--ssl-cert-reqs", "2", "--ssl-certfile", "c", "--ssl-keyfile", "k"}, "give --ssl-ca-certs"},
		{[]string{"--profile", "gpt-9"}, "--profile \"gpt-9\": want one of"},
		{[]string{"--port", "65536"}, "--port"},
		{[]string{"--transfer-port", "-1"}, "--transfer-port"},
		{[]string{"--block-size", "0"}, "--block-size"},
		{[]string{"--num-blocks", "-3"}, "--num-blocks"},
		{[]string{"--max-model-len", "1"}, "--max-model-len"},
		{[]string{"--max-num-seqs", "0"}, "--max-num-seqs"},
		{[]string{"--max-num-batched-tokens", "0"}, "--max-num-batched-tokens"},
		{[]string{"--long-prefill-token-threshold", "-1"}, "--long-prefill-token-threshold"},
		{[]string{"--max-waiting", "0"}, "--max-waiting"},
		{[]string{"--kv-lease", "0s"}, "--kv-lease"},
		{[]string{"--kv-lease", "25h"}, "--kv-lease"},
		{[]string{"--release-policy", "yolo"}, "--release-policy"},
		{[]string{"--fallback", "pray"}, "--fallback"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--drain-timeout", "-1s"}, "--drain-timeout"},
		{[]string{"--max-body-bytes", "0"}, "--max-body-bytes"},
		{[]string{"--model", "two words"}, "--model"},
		{[]string{"--tokenizer-file", "t.bin"}, "--tokenizer-file: goes with --model-file"},
		{[]string{"--no-repack"}, "--no-repack: goes with --model-file"},
		{[]string{"--model-file", filepath.Join(dir, "missing.gguf")}, "--model-file: open"},
		{[]string{"--model-file", short}, "--model-file: "},
		{[]string{"--model-file", secret, "--digest-only"}, "--digest-only: a --model-file"},
		{[]string{"--profile", "llama-8b", "--num-blocks", "100000"}, "--digest-only"},
		{[]string{"--num-blocks", "8", "--max-model-len", "129"}, "--max-model-len 129: larger than the 128 tokens the KV cache holds"},
		{[]string{"--role", "prefill"}, "--cluster-secret-file kvlease.secret"},
		{[]string{"--role", "decode"}, "openssl rand -hex 32"},
		{[]string{"--cluster-secret-file", filepath.Join(dir, "missing")}, "--cluster-secret-file"},
		{[]string{"--cluster-secret-file", short}, "at least 16"},
		{[]string{"--role", "prefill", "--cluster-secret-file", secret, "--host", "0.0.0.0"}, "--advertise-host"},
		{[]string{"--engine-id", strings.Repeat("e", 300)}, "--engine-id"},
		{[]string{"--offload", "gpu:1G"}, "--offload"},
		{[]string{"--offload", "cpu:lots"}, "--offload"},
		{[]string{"--offload", "disk:1G"}, "--offload"},
		{[]string{"--offload", "cpu:1G,cpu:2G"}, "--offload"},
		{[]string{"--offload", "cpu:100B"}, "--offload"}, // less than one block
		{[]string{"--offload", "cpu:1G", "--offload-policy", "sometimes"}, "--offload-policy"},
		{[]string{"--offload-policy", "spillover"}, "--offload-policy spillover: give the tiers with --offload"},
		{[]string{"--lease-spill", "pressure"}, "--lease-spill pressure: give the tiers with --offload"},
		{[]string{"--offload", "cpu:1G", "--lease-spill", "sometimes"}, "--lease-spill: unknown policy \"sometimes\""},
		{[]string{"--cluster-secret-file", secret, "--kv-claim-timeout", "1s"}, "--kv-claim-timeout"},
		{[]string{"--cluster-secret-file", secret, "--kv-claim-timeout", "1s"}, "at least the heartbeat interval 5s"},
		{[]string{"--cluster-secret-file", secret, "--kv-claim-timeout", "30s"}, "shorter than the lease duration"},
		{[]string{"--cluster-secret-file", secret, "--kv-claim-timeout", "-1s"}, "--kv-claim-timeout: want a duration"},
		{[]string{"--cluster-secret-file", secret, "--release-policy", "vllm-lease", "--kv-claim-timeout", "5s"}, "--release-policy lease only"},
		{[]string{"--enable-fault-api"}, "--enable-fault-api: needs --admin-key"},
		{[]string{"--enable-fault-api", "--admin-key", " "}, "--enable-fault-api: needs --admin-key"},
		{[]string{"--enable-fault-api", "--admin-key", "k", "--max-faults", "0"}, "--max-faults"},
	}
	for _, c := range cases {
		code, _, stderr := runCmd(t, append([]string{"serve"}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 1 and %q", c.args, code, stderr, c.want)
		}
	}

	f, err := parseServeFlags([]string{"--role", "prefill", "--cluster-secret-file", secret, "--kv-lease", "3s",
		"--release-policy", "vllm-lease", "--profile", "zero", "--max-waiting", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.role != engine.RolePrefill || f.transfer == nil || f.transfer.Policy != xfer.PolicyVLLMLease ||
		f.transfer.LeaseDuration.Seconds() != 3 || f.transfer.HeartbeatInterval.Milliseconds() != 500 ||
		string(f.secret) != strings.Repeat("ab", 32) || f.model != "kvlease-zero" || f.sched.MaxWaiting != 7 ||
		f.numBlocks != 8192 || f.maxModelLen != 8192 {
		t.Errorf("parsed %+v", f)
	}
	if f.faults != nil {
		t.Errorf("the fault API is on without --enable-fault-api: %+v", f.faults)
	}
	t.Setenv("KVLEASE_ADMIN_KEY", "from-env")
	if f, err := parseServeFlags([]string{"--enable-fault-api", "--fault-seed", "9"}, io.Discard); err != nil ||
		f.faults == nil || f.faults.AdminKey != "from-env" || f.faults.Seed != 9 || f.faults.MaxActive != 64 {
		t.Errorf("--enable-fault-api with KVLEASE_ADMIN_KEY: %+v %v", f.faults, err)
	}
	// A key in the environment turns nothing on by itself.
	if f, err := parseServeFlags(nil, io.Discard); err != nil || f.faults != nil {
		t.Errorf("KVLEASE_ADMIN_KEY alone: %+v %v", f.faults, err)
	}
	t.Setenv("KVLEASE_ADMIN_KEY", "")
	// The claim deadline: lease policy only, --kv-lease/3 unless given.
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 10 * time.Second},
		{[]string{"--kv-lease", "3s"}, time.Second},
		{[]string{"--kv-claim-timeout", "8s"}, 8 * time.Second},
		{[]string{"--kv-claim-timeout", "0s"}, 0},
		{[]string{"--release-policy", "vllm-lease"}, 0},
	} {
		f, err := parseServeFlags(append([]string{"--cluster-secret-file", secret}, c.args...), io.Discard)
		if err != nil || f.transfer.ClaimTimeout != c.want {
			t.Errorf("%v: claim timeout %v (%v), want %v", c.args, f.transfer, err, c.want)
		}
	}
	// legacy-timeout keeps its 480 s unless --kv-lease is given.
	f, _ = parseServeFlags([]string{"--cluster-secret-file", secret, "--release-policy", "legacy-timeout"}, io.Discard)
	if f.transfer.LeaseDuration.Seconds() != 480 {
		t.Errorf("legacy-timeout lease %v", f.transfer.LeaseDuration)
	}
	// A secret from the environment; role both without one is a single engine.
	t.Setenv(secretEnv, strings.Repeat("cd", 16))
	if f, err = parseServeFlags([]string{"--role", "decode"}, io.Discard); err != nil || string(f.secret) != strings.Repeat("cd", 16) {
		t.Errorf("secret from %s: %v", secretEnv, err)
	}
	t.Setenv(secretEnv, "")
	if f, _ = parseServeFlags(nil, io.Discard); f.transfer != nil || f.role != engine.RoleBoth {
		t.Errorf("default serve has transfer %v role %v", f.transfer, f.role)
	}
	// Offload: tiers and policy.
	dir2 := t.TempDir()
	f, err = parseServeFlags([]string{"--offload", "cpu:64MiB,disk:" + dir2 + ":1G", "--offload-policy", "spillover"}, io.Discard)
	if err != nil || f.offload == nil || len(f.offload.Tiers) != 2 || f.offload.Policy != offload.Spillover ||
		f.offload.Tiers[0].Medium != offload.MediumCPU || f.offload.Tiers[1].Path != dir2 {
		t.Errorf("--offload: %v, %+v", err, f.offload)
	}
	for i, name := range offload.PolicyNames {
		f, err := parseServeFlags([]string{"--offload", "cpu:64MiB", "--offload-policy", name}, io.Discard)
		if err != nil || f.offload == nil || f.offload.Policy != offload.PolicyKind(i+1) {
			t.Errorf("--offload-policy %s: %v, %+v", name, err, f.offload)
		}
	}
	for i, name := range offload.LeaseSpillNames {
		f, err := parseServeFlags([]string{"--offload", "cpu:64MiB", "--lease-spill", name}, io.Discard)
		if err != nil || f.offload == nil || f.offload.LeaseSpill != offload.LeaseSpillPolicy(i) {
			t.Errorf("--lease-spill %s: %v, %+v", name, err, f.offload)
		}
	}
	t.Setenv("KVLEASE_LEASE_SPILL", "always")
	if f, err := parseServeFlags([]string{"--offload", "cpu:64MiB"}, io.Discard); err != nil || f.offload.LeaseSpill != offload.LeaseSpillAlways {
		t.Errorf("KVLEASE_LEASE_SPILL=always: %v, %+v", err, f.offload)
	}
	t.Setenv("KVLEASE_LEASE_SPILL", "")
	if f, _ = parseServeFlags(nil, io.Discard); f.offload != nil {
		t.Errorf("offload on by default: %+v", f.offload)
	}
	// The default block count fits 1 GiB of the profile's KV.
	if f, _ = parseServeFlags([]string{"--profile", "llama-8b"}, io.Discard); f.numBlocks != 512 {
		t.Errorf("llama-8b default blocks %d, want 512 (2 MiB each in 1 GiB)", f.numBlocks)
	}
	// The profile's context (131072 tokens) is lowered to what the pool
	// holds, as vLLM refuses a longer one; a length that fits stays.
	if f, _ = parseServeFlags([]string{"--profile", "llama-8b"}, io.Discard); f.maxModelLen != 512*16 {
		t.Errorf("llama-8b default max-model-len %d, want the pool's 8192 tokens", f.maxModelLen)
	}
	if f, err := parseServeFlags([]string{"--num-blocks", "8", "--max-model-len", "128"}, io.Discard); err != nil || f.maxModelLen != 128 {
		t.Errorf("--max-model-len 128 on 8 blocks of 16: %d, %v", f.maxModelLen, err)
	}
	if f, _ = parseServeFlags(nil, io.Discard); f.maxModelLen != 8192 {
		t.Errorf("tiny default max-model-len %d, want the profile's 8192", f.maxModelLen)
	}
}

// serveInProcess runs kvlease serve with args until the returned cancel;
// it returns the base URL and a channel with the exit code.
func serveInProcess(t *testing.T, args ...string) (string, context.CancelFunc, <-chan int, *clitest.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb clitest.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- Program{Name: "kvlease"}.Run(ctx, append([]string{"serve", "--port", "0"}, args...), &out, &errb)
	}()
	m := clitest.WaitFor(t, &out, regexp.MustCompile(`kvlease serve on (http://\S+):`), exited)
	t.Cleanup(cancel)
	errb.Write([]byte("stdout: " + out.String()))
	return m[1], cancel, exited, &errb
}

func TestServeServesAndStops(t *testing.T) {
	url, cancel, exited, errb := serveInProcess(t, "--profile", "zero", "--model", "m")
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"hi","max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"completion_tokens":`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("exit %d; stderr %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "msg=stopped") {
		t.Errorf("no stop log in %s", errb.String())
	}
}

// A request still running when the drain timeout passes is aborted: its
// client sees finish_reason abort, and serve exits 0.
func TestServeDrainTimeoutAborts(t *testing.T) {
	url, cancel, exited, errb := serveInProcess(t, "--profile", "tiny", "--drain-timeout", "50ms")
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"hi","max_tokens":4000,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if !strings.Contains(string(rest), `"finish_reason":"abort"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream after the drain timeout ends with %q", tail(string(rest), 300))
	}
	if code := <-exited; code != 0 {
		t.Errorf("exit %d; stderr %s", code, errb.String())
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// A prefill engine listens on its transfer port and says where.
func TestServePrefillAnnouncesTransfer(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "s")
	os.WriteFile(secret, []byte(strings.Repeat("ab", 32)), 0o600)
	_, cancel, exited, errb := serveInProcess(t, "--role", "prefill", "--transfer-port", "0",
		"--cluster-secret-file", secret, "--profile", "zero")
	if !regexp.MustCompile(`transfer on 127\.0\.0\.1:\d+ \(engine id 127\.0\.0\.1:\d+, policy lease\)`).MatchString(errb.String()) {
		t.Errorf("no transfer endpoint announced: %s", errb.String())
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("exit %d; stderr %s", code, errb.String())
	}
}

// A multi-turn workload on a pool too small to keep every conversation's
// history: with --offload cpu the evicted prefixes are loaded back from
// host memory (offload hits and loaded blocks in /metrics), and every
// answer is the text the engine gives without offload.
func TestServeOffloadMultiTurn(t *testing.T) {
	run := func(args ...string) ([]string, string) {
		url, cancel, exited, errb := serveInProcess(t, append([]string{"--profile", "zero", "--model", "m",
			"--num-blocks", "32", "--block-size", "16"}, args...)...)
		texts := multiTurn(t, url, 6, 4)
		metricsText := get(t, url+"/metrics")
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("exit %d; stderr %s", code, errb.String())
		}
		return texts, metricsText
	}
	off, offMetrics := run()
	on, onMetrics := run("--offload", "cpu:256blocks")
	if strings.Contains(offMetrics, "kvlease_offload_hits_total{") {
		t.Errorf("offload series without --offload")
	}
	for i := range off {
		if on[i] != off[i] {
			t.Fatalf("answer %d with offload %q, without %q", i, on[i], off[i])
		}
	}
	for _, name := range []string{"kvlease_offload_hits_total", "kvlease_offload_loaded_blocks_total", "kvlease_offload_stored_blocks_total"} {
		m := regexp.MustCompile(name + `\{medium="CPU",model_name="m",policy="store-on-compute"\} (\d+)`).FindStringSubmatch(onMetrics)
		if m == nil || m[1] == "0" {
			t.Errorf("%s: %v in\n%s", name, m, onMetrics)
		}
	}
}

// TestServeOffloadRequestLevel: `--offload-policy request-level` from the
// command line stores and loads whole requests. 12 conversations of 3
// turns, round robin, each turn's prompt the previous prompt and the
// token ids it returned (300 to 428 tokens: 18 to 26 blocks of 16, more
// than a quarter of the 64-block pool, the default in-flight bounds of the
// other policies, which cut every such unit to nothing: stored 0), on a
// pool too small to keep them: every unit is stored, none refused, and the
// later turns load their history back.
func TestServeOffloadRequestLevel(t *testing.T) {
	url, cancel, exited, errb := serveInProcess(t, "--profile", "zero", "--model", "m", "--num-blocks", "64",
		"--block-size", "16", "--offload", "cpu:4096blocks", "--offload-policy", "request-level")
	prompts := make([][]int, 12)
	for c := range prompts {
		for i := range 300 {
			prompts[c] = append(prompts[c], 1+(c*31+i*7)%250)
		}
		prompts[c][0] = c
	}
	for turn := range 3 {
		for c := range prompts {
			body, _ := json.Marshal(map[string]any{"model": "m", "prompt": prompts[c], "max_tokens": 64,
				"ignore_eos": true, "return_token_ids": true})
			resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Choices []struct {
					TokenIDs []int `json:"token_ids"`
				} `json:"choices"`
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 || len(out.Choices[0].TokenIDs) != 64 {
				t.Fatalf("turn %d of %d: %d %s", turn, c, resp.StatusCode, raw)
			}
			prompts[c] = append(prompts[c], out.Choices[0].TokenIDs...)
		}
	}
	metricsText := get(t, url+"/metrics")
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("exit %d; stderr %s", code, errb.String())
	}
	value := func(name string) string {
		m := regexp.MustCompile(name + `\{medium="CPU",model_name="m",policy="request-level"\} (\d+)`).FindStringSubmatch(metricsText)
		if m == nil {
			t.Fatalf("no %s in\n%s", name, metricsText)
		}
		return m[1]
	}
	stored, hits, refused := value("kvlease_offload_stored_blocks_total"), value("kvlease_offload_hits_total"), value("kvlease_offload_refused_blocks_total")
	if stored == "0" || hits == "0" || refused != "0" {
		t.Errorf("request-level: stored %s, hits %s, refused %s blocks; want stored and hits, none refused", stored, hits, refused)
	}
	t.Logf("request-level: stored %s, hits %s, refused %s blocks", stored, hits, refused)
}

// multiTurn runs convs chat conversations of turns turns each, round
// robin, each turn appending the answer and a new user message to the
// conversation's history; it returns the answers in order.
func multiTurn(t *testing.T, url string, convs, turns int) []string {
	t.Helper()
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	hist := make([][]msg, convs)
	var answers []string
	for turn := range turns {
		for c := range convs {
			hist[c] = append(hist[c], msg{"user", fmt.Sprintf("conversation %d, turn %d: tell me more about the blocks %d.", c, turn, c*turn)})
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": hist[c], "max_tokens": 16,
				"temperature": 0, "ignore_eos": true})
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Choices []struct {
					Message msg `json:"message"`
				} `json:"choices"`
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 {
				t.Fatalf("turn %d of %d: %d %s", turn, c, resp.StatusCode, raw)
			}
			a := out.Choices[0].Message.Content
			answers = append(answers, a)
			hist[c] = append(hist[c], msg{"assistant", a})
		}
	}
	return answers
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// S23: a prefill engine told to stop (SIGTERM) with a lease outstanding
// refuses new requests, keeps serving the lease until the decode engine
// has read it, then exits 0 well before its drain timeout. The decode
// engine's kvlease_transfer_seconds counts the pull.
func TestServePrefillDrainServesOutstandingLease(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "s")
	os.WriteFile(secret, []byte(strings.Repeat("ab", 32)), 0o600)
	common := []string{"--transfer-port", "0", "--cluster-secret-file", secret, "--profile", "zero", "--model", "m"}
	pURL, stopP, pExited, pErr := serveInProcess(t, append([]string{"--role", "prefill", "--drain-timeout", "1m"}, common...)...)
	dURL, stopD, dExited, dErr := serveInProcess(t, append([]string{"--role", "decode"}, common...)...)

	const req = `{"model":"m","prompt":"the lease outlives the engine's last request","max_tokens":6,"ignore_eos":true,"temperature":0`
	resp, err := http.Post(pURL+"/v1/completions", "application/json",
		strings.NewReader(req+`,"kv_transfer_params":{"do_remote_decode":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	var pOut struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(raw, &pOut) != nil || !bytes.Contains(pOut.KV, []byte(`"lease_token"`)) {
		t.Fatalf("P answered %d %s", resp.StatusCode, raw)
	}

	stopP() // SIGTERM
	clitest.WaitFor(t, pErr, regexp.MustCompile(`msg=draining .*leases=1`), pExited)
	if resp, err := http.Post(pURL+"/v1/completions", "application/json", strings.NewReader(req+`}`)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("draining P answered a new request with %d", resp.StatusCode)
		}
	}

	resp, err = http.Post(dURL+"/v1/completions", "application/json",
		strings.NewReader(req+`,"kv_transfer_params":`+string(pOut.KV)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	var dOut struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(raw, &dOut) != nil || dOut.Usage.Details.Cached != dOut.Usage.PromptTokens {
		t.Fatalf("D answered %d %s; want the prompt pulled from P", resp.StatusCode, raw)
	}
	if code := <-pExited; code != 0 {
		t.Errorf("P exit %d; stderr %s", code, pErr.String())
	}
	if !regexp.MustCompile(`msg=stopped .*leases_read=1 leases_ended_at_shutdown=0`).MatchString(pErr.String()) {
		t.Errorf("P's stop log does not show the lease read: %s", pErr.String())
	}
	if m := get(t, dURL+"/metrics"); !strings.Contains(m, `kvlease_transfer_seconds_count{model_name="m"} 1`) {
		t.Errorf("D's kvlease_transfer_seconds did not count the pull:\n%s", m)
	}
	stopD()
	if code := <-dExited; code != 0 {
		t.Errorf("D exit %d; stderr %s", code, dErr.String())
	}
}
