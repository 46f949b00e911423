package pd

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/proxy"
)

// writeAdapter makes a PEFT-style LoRA adapter directory.
func writeAdapter(t *testing.T, weights string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"adapter_config.json":       `{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":["q_proj","v_proj"]}`,
		"adapter_model.safetensors": weights,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoRAThroughProxyMatchesSingleEngine: a request naming a LoRA adapter
// (served by P and D from the same files) gets, through the P/D proxy, the
// very text a single engine with the adapter gives, greedy and sampled,
// completion and chat — a text the base model does not give — and the
// response names the adapter. When the decode engine no longer serves the
// adapter, the client gets its 404 and P releases the lease as rejected at
// once.
func TestLoRAThroughProxyMatchesSingleEngine(t *testing.T) {
	dir := writeAdapter(t, "sql adapter weights")
	t.Setenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "true") // the engines inherit it
	modules := []string{"--lora-modules", "sql=" + dir}
	ref := client(serveSingle(t, modules...))
	c := startCluster(t, localcluster.Options{ExtraServeArgs: modules})
	pd := client(c.URL())
	ctx := context.Background()

	complete := func(cl openai.Client, m string, temp float64) (string, error) {
		p := completionParams("SELECT name FROM users WHERE")
		p.Model, p.Temperature, p.Seed = openai.CompletionNewParamsModel(m), openai.Float(temp), openai.Int(7)
		r, err := cl.Completions.New(ctx, p)
		if err != nil {
			return "", err
		}
		if r.Model != m {
			return "", errors.New("the response names model " + r.Model + ", want " + m)
		}
		return r.Choices[0].Text, nil
	}
	chat := func(cl openai.Client, m string, temp float64) (string, error) {
		p := chatParams("Write a query.")
		p.Model, p.Temperature, p.Seed = m, openai.Float(temp), openai.Int(7)
		r, err := cl.Chat.Completions.New(ctx, p)
		if err != nil {
			return "", err
		}
		if r.Model != m {
			return "", errors.New("the response names model " + r.Model + ", want " + m)
		}
		return r.Choices[0].Message.Content, nil
	}
	for _, g := range []struct {
		name string
		run  func(openai.Client, string, float64) (string, error)
		temp float64
	}{{"completion greedy", complete, 0}, {"completion sampled", complete, 0.9}, {"chat greedy", chat, 0}, {"chat sampled", chat, 0.9}} {
		want, err := g.run(ref, "sql", g.temp)
		if err != nil {
			t.Fatalf("%s: single engine: %v", g.name, err)
		}
		got, err := g.run(pd, "sql", g.temp)
		if err != nil {
			t.Fatalf("%s: through the proxy: %v", g.name, err)
		}
		if got != want || got == "" {
			t.Errorf("%s: through the proxy %q\n        single engine %q", g.name, got, want)
		}
		if base, err := g.run(ref, model, g.temp); err != nil || base == want {
			t.Errorf("%s: the base model answered %q (%v), as the adapter", g.name, base, err)
		}
	}
	p := c.URLs(proxy.RolePrefill)[0]
	d := c.URLs(proxy.RoleDecode)[0]
	waitQuiet(t, c)

	// D stops serving the adapter: the decode leg is refused, P is told.
	resp, err := http.Post(d+"/v1/unload_lora_adapter", "application/json", strings.NewReader(`{"lora_name":"sql"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("unload on D: %d", resp.StatusCode)
	}
	// D tells P (RELEASE rejected) and the proxy aborts P's request too;
	// whichever P hears first ends the lease, at once, not at its expiry.
	released := func() float64 {
		n := 0.0
		for _, r := range []string{"rejected", "aborted", "undelivered"} {
			n += max(0, e2e.Metric(t, p, `kvlease_leases_released_total{model_name="`+model+`",reason="`+r+`"}`))
		}
		return n
	}
	toldP := `kvlease_releases_sent_total{model_name="` + model + `",reason="rejected"}`
	before, toldBefore := released(), max(0, e2e.Metric(t, d, toldP))
	_, err = complete(pd, "sql", 0)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.Message, "`sql` does not exist") {
		t.Fatalf("a decode engine without the adapter: %v", err)
	}
	e2e.WaitFor(t, "P's release of the refused request's lease", func() bool { return released() == before+1 })
	e2e.WaitFor(t, "D's rejection notice", func() bool { return e2e.Metric(t, d, toldP) == toldBefore+1 })
	waitQuiet(t, c)
}
