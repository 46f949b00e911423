package proxy

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCancelConcurrentStreams starts 50 streaming requests and has each
// client leave at a random moment — while P prefills, while D holds the
// request before answering, after a few events, or after a random delay
// wherever that lands — then checks that every engine that saw a request
// saw its abort and that no leg is left running anywhere.
func TestCancelConcurrentStreams(t *testing.T) {
	const clients = 50
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)

	r := newRig(t, 2, 2, nil)
	plans := make(map[string]*plan, clients)
	modes := []string{"hold-p", "hold-d", "stream", "delay"}
	for i := range clients {
		pl := &plan{mode: modes[rng.IntN(len(modes))], events: 1 + rng.IntN(5),
			delay: time.Duration(rng.IntN(50)) * time.Millisecond, reach: make(chan struct{})}
		plans[fmt.Sprintf("r%d", i)] = pl
	}
	hold := func(mode string) func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		return func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			if req.str("user") != mode {
				return false
			}
			close(plans[req.id].reach)
			<-ctx.Done()
			return true
		}
	}
	for _, p := range r.pre {
		p.hook = hold("hold-p")
	}
	for _, d := range r.dec {
		h := hold("hold-d")
		d.hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			if h(ctx, w, req) {
				return true
			}
			r.dec[0].answerDecode(ctx, w, req, 5*time.Millisecond) // streams until it is cancelled
			return true
		}
	}

	var wg sync.WaitGroup
	for id, pl := range plans {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := fmt.Sprintf(`{"model":"m","prompt":"p","stream":true,"max_tokens":-1,"user":%q}`, pl.mode)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+"/v1/completions", strings.NewReader(body))
			req.Header.Set("X-Request-Id", id)
			switch pl.mode {
			case "hold-p", "hold-d":
				go func() {
					<-pl.reach
					cancel()
				}()
			case "delay":
				time.AfterFunc(pl.delay, cancel)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for n := 0; ; n++ {
				if pl.mode == "stream" && n == 2*pl.events { // a data line and a blank line per event
					cancel()
				}
				if _, err := br.ReadString('\n'); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()

	waitFor(t, "the proxy to finish every request", func() bool { return r.p.InFlight() == 0 })
	var counted float64
	for _, o := range outcomes {
		counted += r.outcome(o)
	}
	sure := 0.0 // requests certain to have reached the proxy
	for _, pl := range plans {
		if pl.mode != "delay" {
			sure++
		}
	}
	if cancelled := r.outcome(OutcomeClientCancelled); cancelled != counted || counted < sure {
		t.Errorf("%v requests ended as client_cancelled of %v counted; want all of them (every client left)", cancelled, counted)
	}
	engines := append(append([]*fakeEngine{}, r.pre...), r.dec...)
	waitFor(t, "every engine's legs to end", func() bool {
		for _, f := range engines {
			if f.active.Load() != 0 {
				return false
			}
		}
		return true
	})
	for _, f := range engines {
		for _, req := range f.requests() {
			if f.abortCount(req.id) == 0 {
				t.Errorf("%s engine %s saw request %s (%s) but no abort", f.role, f.hostPort(), req.id, plans[req.id].mode)
			}
		}
	}
	for _, e := range r.p.engines {
		if n := e.inflight.Load(); n != 0 {
			t.Errorf("the proxy counts %d legs still at %s", n, e.base)
		}
	}
	// Every planned stage was reached by at least one request, so each
	// kind of cancellation was exercised.
	reached := map[string]int{}
	for _, d := range r.dec {
		for _, req := range d.requests() {
			reached[plans[req.id].mode]++
		}
	}
	t.Logf("decode legs by mode: %v; aborts sent: P %v, D %v", reached,
		r.aborts(RolePrefill, "ok"), r.aborts(RoleDecode, "ok"))
	if reached["stream"] == 0 || reached["hold-d"] == 0 {
		t.Errorf("no decode leg was streaming or held when its client left: %v", reached)
	}
}

// plan is how one client of TestCancelConcurrentStreams leaves.
type plan struct {
	mode   string
	events int
	delay  time.Duration
	reach  chan struct{} // closed when the holding engine has the request
}
