// Package e2e holds what the tests that run kvlease as processes share
// (internal/e2e/api, internal/e2e/pd, internal/e2e/scenarios and
// internal/chaos): waiting for a condition without sleeping a fixed time,
// and posting JSON to an engine or a proxy.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Timeout bounds a wait for a condition unless a test says otherwise. It
// is generous (the tests run beside others on loaded machines), yet
// shorter than the engines' default 30 s lease, so a lease that only
// expiry would free still fails a wait for the engines to be quiet.
const Timeout = 15 * time.Second

// ErrTimeout is Poll's answer when the condition did not hold in time.
var ErrTimeout = errors.New("timed out")

// Poll calls cond until it holds (nil) or timeout passes (ErrTimeout). It
// checks at once, then after 2 ms, doubling the pause up to 50 ms, so a
// condition about to hold is seen quickly and one that takes seconds (a
// scrape of several engines' metrics, say) is not asked hundreds of times
// a second.
func Poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	pause := 2 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	return nil
}

// WaitFor is Poll for Timeout, failing t with what it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitWithin(t, what, Timeout, cond)
}

// WaitWithin is Poll for timeout, failing t with what it waited for.
func WaitWithin(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if Poll(timeout, cond) != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// PostJSON posts body to url as JSON with more headers (name, value, ...)
// and decodes the JSON answer, failing t if the request fails or the
// answer is not a JSON object. Call it from the test's goroutine only
// (t.Fatal); other goroutines use Post.
func PostJSON(t testing.TB, url, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: %d, reading the answer: %v", url, resp.StatusCode, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("POST %s: %d %q: %v", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

// Post is PostJSON for any goroutine: a request that fails is status 0
// with the error as the answer's "error"; an answer that is not JSON
// decodes to an empty map.
func Post(url, body string) (int, map[string]any) {
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, map[string]any{"error": err.Error()}
	}
	defer resp.Body.Close()
	m := map[string]any{}
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// Metric returns the value of the series whose line in url's /metrics
// starts with series (its name and labels, in the exporter's label order),
// or -1 when there is none.
func Metric(t testing.TB, url, series string) float64 {
	t.Helper()
	return MetricOver(t, http.DefaultClient, url, series)
}

// MetricOver is Metric through hc (an https URL's client, say).
func MetricOver(t testing.TB, hc *http.Client, url, series string) float64 {
	t.Helper()
	resp, err := hc.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s/metrics: %s: %v", url, sc.Text(), err)
			}
			return v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s/metrics: %v", url, err)
	}
	return -1
}
