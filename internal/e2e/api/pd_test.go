package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/internal/e2e"
)

// pdCluster is a prefill engine, a decode engine and a single engine of the
// same model, for comparing outputs.
type pdCluster struct {
	p, d, single *testEngine
}

func startPD(t *testing.T) pdCluster {
	return pdCluster{
		p:      startEngine(t, engineOpts{role: engine.RolePrefill}),
		d:      startEngine(t, engineOpts{role: engine.RoleDecode}),
		single: startEngine(t, engineOpts{}),
	}
}

const pdPrompt = "Disaggregated serving moves the prompt's KV cache from a prefill engine to a decode engine."

// prefill sends the prefill leg as vLLM's and llm-d's proxies do and
// returns P's kv_transfer_params, raw.
func (c pdCluster) prefill(t *testing.T, id string) json.RawMessage {
	t.Helper()
	status, m := e2e.PostJSON(t, c.p.url+"/v1/completions", `{"model":"`+modelName+`","prompt":"`+pdPrompt+`","max_tokens":1,"stream":false,`+
		`"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`,
		"X-Request-Id", id)
	if status != 200 || m["kv_transfer_params"] == nil {
		t.Fatalf("prefill: %d %v", status, m)
	}
	raw, _ := json.Marshal(m["kv_transfer_params"])
	return raw
}

func (c pdCluster) pHeld(t *testing.T) float64 { return c.p.held(t) }

func (c pdCluster) released(t *testing.T, reason string) float64 {
	return c.p.metric(t, `kvlease_leases_released_total{model_name="`+modelName+`",reason="`+reason+`"}`)
}

// The decode engine pulls P's blocks and generates exactly the tokens a
// single engine generates; P frees the blocks when D has read them.
func TestPDMatchesSingleEngine(t *testing.T) {
	c := startPD(t)
	ctx := context.Background()
	for i, seed := range []int64{1, 2} {
		id := "pd-" + string(rune('a'+i))
		kv := c.prefill(t, id)
		if c.pHeld(t) == 0 {
			t.Fatal("P holds no blocks for the lease")
		}
		p := completion(pdPrompt, 24)
		p.Seed, p.Temperature = openai.Int(seed), openai.Float(0.8)
		dc := c.d.client(option.WithHeader("X-Request-Id", id))
		got, err := dc.Completions.New(ctx, p, option.WithJSONSet("kv_transfer_params", json.RawMessage(kv)), option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		sc := c.single.client()
		want, err := sc.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Text != want.Choices[0].Text {
			t.Errorf("seed %d: decode engine %q, single engine %q", seed, got.Choices[0].Text, want.Choices[0].Text)
		}
		if got.Usage.PromptTokensDetails.CachedTokens != int64(len(pdPrompt)) {
			t.Errorf("decode cached_tokens %d, want the whole prompt %d", got.Usage.PromptTokensDetails.CachedTokens, len(pdPrompt))
		}
		e2e.WaitFor(t, "P to free the read blocks", func() bool { return c.pHeld(t) == 0 })
		if got := c.released(t, "read_done"); got != float64(i+1) {
			t.Errorf("released read_done %v, want %d", got, i+1)
		}
	}
	if got := c.d.metric(t, `kvlease_transfer_bytes_total{direction="in",model_name="`+modelName+`"}`); got <= 0 {
		t.Errorf("D pulled %v bytes", got)
	}
}

// A decode engine that refuses the request tells P at once (S7): P frees
// the blocks with reason rejected, without waiting for the lease.
func TestPDRejectionReleasesAtOnce(t *testing.T) {
	c := startPD(t)
	for i, tc := range []struct {
		name, body string
		status     int
	}{
		{"unknown model", `{"model":"other","prompt":"` + pdPrompt + `","max_tokens":5`, 404},
		{"invalid value", `{"model":"` + modelName + `","prompt":"` + pdPrompt + `","max_tokens":5,"top_p":7`, 400},
	} {
		kv := c.prefill(t, "rej-"+strings.ReplaceAll(tc.name, " ", "-"))
		status, m := e2e.PostJSON(t, c.d.url+"/v1/completions", tc.body+`,"kv_transfer_params":`+string(kv)+`}`)
		if status != tc.status {
			t.Errorf("%s: %d %v", tc.name, status, m)
		}
		e2e.WaitFor(t, tc.name+": P to free the rejected lease", func() bool { return c.pHeld(t) == 0 })
		if got := c.released(t, "rejected"); got != float64(i+1) {
			t.Errorf("%s: released rejected %v, want %d", tc.name, got, i+1)
		}
	}
}

// The proxy's client leaves after P answered: the proxy aborts the request
// on P, which revokes the lease at once.
func TestPDAbortAfterFinishRevokes(t *testing.T) {
	c := startPD(t)
	c.prefill(t, "gone-1")
	status, m := e2e.PostJSON(t, c.p.url+"/kvlease/v1/requests/gone-1/abort", "")
	if status != 200 || m["result"] != "already_finished" {
		t.Errorf("abort: %d %v", status, m)
	}
	if got := c.pHeld(t); got != 0 {
		t.Errorf("P holds %v blocks after the abort", got)
	}
	if got := c.released(t, "aborted"); got != 1 {
		t.Errorf("released aborted %v", got)
	}
	if !strings.Contains(c.p.url, "127.0.0.1") {
		t.Errorf("engine not on loopback: %s", c.p.url)
	}
}
