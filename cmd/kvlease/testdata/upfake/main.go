// Command upfake stands in for `kvlease serve` in the tests of `kvlease
// up`: it takes serve's flags, answers /health and the P/D legs, and stops
// on SIGTERM. With --role decode and UPFAKE_DIE_AFTER_HEALTH set it exits 7
// after its first /health answer, to test that a dying engine is reported.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "upfake: want serve")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	role := fs.String("role", "", "")
	host := fs.String("host", "", "")
	port := fs.Int("port", 0, "")
	fs.Int("transfer-port", 0, "")
	fs.String("profile", "", "")
	fs.String("model", "", "")
	fs.Duration("drain-timeout", 0, "")
	fs.String("cluster-secret-file", "", "")
	fs.Int("num-blocks", 0, "")
	fs.Parse(os.Args[2:])
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "upfake:", err)
		os.Exit(1)
	}
	die := *role == "decode" && os.Getenv("UPFAKE_DIE_AFTER_HEALTH") != ""
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if die {
			go func() {
				time.Sleep(50 * time.Millisecond)
				fmt.Fprintln(os.Stderr, "upfake: dying as told")
				os.Exit(7)
			}()
		}
	})
	gen := func(w http.ResponseWriter, r *http.Request) {
		if *role == "prefill" {
			fmt.Fprint(w, `{"choices":[],"kv_transfer_params":{"do_remote_prefill":true}}`)
			return
		}
		fmt.Fprint(w, `{"choices":[{"text":"hello from upfake"}]}`)
	}
	mux.HandleFunc("POST /v1/completions", gen)
	mux.HandleFunc("POST /v1/chat/completions", gen)
	fmt.Fprintf(os.Stderr, "upfake %s on %s\n", *role, ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	<-ctx.Done()
	srv.Close()
}
