package pd

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/internal/tlsfiles"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/proxy"
)

// httpsClient is an HTTP client with cfg (nil: the system's CAs).
func httpsClient(t *testing.T, cfg *tls.Config) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func tlsClient(t *testing.T, files tlsfiles.ClientFiles) *http.Client {
	t.Helper()
	cfg, err := tlsfiles.Client(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return httpsClient(t, cfg)
}

// sdk is an SDK client of base over hc, without retries.
func sdk(base string, hc *http.Client) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHTTPClient(hc))
}

// TestTLSCluster: a cluster with HTTPS on every HTTP port and engines
// that require client certificates (kvlease up --tls --tls-client-certs).
// The SDK over HTTPS through the proxy (whose legs, aborts and scrapes are
// TLS with its client certificate) gets exactly a single engine's text,
// the prefill engine leasing each prompt; the SDK straight to an engine
// with the CA and a certificate is served; a client without the CA is
// refused by the proxy, and one without a certificate by the engines.
func TestTLSCluster(t *testing.T) {
	ref := client(singleEngine(t).url)
	l, err := tlsfiles.WriteLocal(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, localcluster.Options{TLS: &l, ClientCerts: true})
	if !strings.HasPrefix(c.URL(), "https://") {
		t.Fatalf("proxy URL %s", c.URL())
	}
	withCA := tlsClient(t, tlsfiles.ClientFiles{CAFile: l.CAFile})
	withCert := tlsClient(t, tlsfiles.ClientFiles(l))
	pd := sdk(c.URL(), withCA)
	ctx := context.Background()
	for _, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			want, err := g.run(ctx, ref)
			if err != nil {
				t.Fatalf("single engine: %v", err)
			}
			got, err := g.run(ctx, pd)
			if err != nil {
				t.Fatalf("through the proxy over TLS: %v", err)
			}
			if got != want || got == "" {
				t.Errorf("through the proxy %q\n        single engine %q", got, want)
			}
		})
	}
	p, d := c.URLs(proxy.RolePrefill)[0], c.URLs(proxy.RoleDecode)[0]
	if granted := e2e.MetricOver(t, withCert, p, `kvlease_leases_granted_total{model_name="`+model+`"}`); granted < 1 {
		t.Errorf("P granted %v leases: the requests did not go through P/D", granted)
	}
	for _, e := range c.Engines() { // the proxy's scrapes reach them
		if up := e2e.MetricOver(t, withCA, c.URL(), `kvlease_proxy_engine_up{engine="`+strings.TrimPrefix(e.URL, "https://")+`",role="`+e.Role+`"}`); up != 1 {
			t.Errorf("the proxy sees %s as up=%v", e.Name(), up)
		}
	}
	if got, err := generators[0].run(ctx, sdk(d, withCert)); err != nil || got == "" {
		t.Errorf("SDK straight to the decode engine with a client certificate: %q %v", got, err)
	}
	if _, err := generators[0].run(ctx, sdk(c.URL(), httpsClient(t, nil))); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the CA: %v, want a certificate error", err)
	}
	if _, err := generators[0].run(ctx, sdk(d, withCA)); err == nil {
		t.Error("an engine requiring client certificates served a client without one")
	}
}
