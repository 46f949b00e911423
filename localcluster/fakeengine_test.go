package localcluster

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// The cluster tests run engines as this test binary in fake-engine mode,
// so they do not depend on the real `kvlease serve`.
const fakeEngineEnv = "KVLEASE_CLUSTER_FAKE_ENGINE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEngineEnv) != "" {
		os.Exit(fakeEngineMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeEngineMain is a minimal engine honouring serve's command line and
// the P/D HTTP contract: a prefill engine answers with kv_transfer_params,
// a decode engine with "decoded by <port>". KVLEASE_CLUSTER_FAKE_ENGINE
// selects misbehaviour: "fail" exits 3 at once, "unhealthy" never answers
// /health with 200.
func fakeEngineMain(args []string) int {
	mode := os.Getenv(fakeEngineEnv)
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(os.Stderr, "fake engine: want serve, got", args)
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	role := fs.String("role", "", "")
	host := fs.String("host", "", "")
	port := fs.Int("port", 0, "")
	fs.Int("transfer-port", 0, "")
	fs.String("profile", "", "")
	fs.String("model", "", "")
	fs.Duration("drain-timeout", 0, "")
	secret := fs.String("cluster-secret-file", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "fake engine: boom, failing as told")
		return 3
	}
	st, err := os.Stat(*secret)
	if err != nil || st.Mode().Perm() != 0o600 {
		fmt.Fprintln(os.Stderr, "fake engine: the secret file is missing or not 0600:", err)
		return 4
	}
	b, _ := os.ReadFile(*secret)
	if len(strings.TrimSpace(string(b))) != 64 {
		fmt.Fprintln(os.Stderr, "fake engine: the secret is not 256 bits of hex")
		return 4
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake engine:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if mode == "unhealthy" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "vllm:num_requests_waiting 0\nkvlease_leases_active 0")
	})
	mux.HandleFunc("POST /kvlease/v1/requests/{id}/abort", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"id":%q,"result":"already_finished"}`, r.PathValue("id"))
	})
	gen := func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		if *role == "prefill" {
			fmt.Fprintf(w, `{"choices":[{"text":"x"}],"kv_transfer_params":{"do_remote_prefill":true,"remote_port":%d}}`, *port)
			return
		}
		kv, _ := body["kv_transfer_params"].(map[string]any)
		fmt.Fprintf(w, `{"choices":[{"text":"decoded by %d after %v"}]}`, *port, kv["remote_port"])
	}
	mux.HandleFunc("POST /v1/completions", gen)
	mux.HandleFunc("POST /v1/chat/completions", gen)
	fmt.Fprintf(os.Stderr, "fake %s engine on %s\n", *role, ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "fake engine: stopping")
	srv.Close()
	return 0
}
