package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

const testAdminKey = "admin-secret"

func faultServer(t *testing.T) string {
	t.Helper()
	_, url := newServer(t, newNode(t, nodeOpts{}), func(c *Config) {
		c.Faults = &FaultConfig{AdminKey: testAdminKey, MaxActive: 2, Seed: 1}
	})
	return url
}

func doReq(t *testing.T, method, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var admin = []string{"Authorization", "Bearer " + testAdminKey}

func TestFaultAPIOffByDefault(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	if st, body := doReq(t, "GET", url+FaultsPath, "", admin...); st != 404 || !strings.Contains(body, "--enable-fault-api") {
		t.Errorf("GET with the API off: %d %s", st, body)
	}
	// X-Return-Error is ignored without the API.
	st, body := doReq(t, "POST", url+"/v1/completions", `{"prompt":"hi","max_tokens":2}`, ReturnErrorHeader, "503")
	if st != 200 {
		t.Errorf("X-Return-Error with the API off: %d %s", st, body)
	}
	if _, err := New(newNode(t, nodeOpts{}), Config{ModelName: "m", Faults: &FaultConfig{}}); err == nil {
		t.Error("New accepted the fault API without an admin key")
	}
}

func TestFaultAPIAuth(t *testing.T) {
	url := faultServer(t)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testAdminKey, testAdminKey} {
		if st, _ := doReq(t, "GET", url+FaultsPath, "", "Authorization", auth); st != 401 {
			t.Errorf("Authorization %q: %d, want 401", auth, st)
		}
		if st, _ := doReq(t, "POST", url+FaultsPath, `{"kind":"fallback"}`, "Authorization", auth); st != 401 {
			t.Errorf("POST with Authorization %q: %d, want 401", auth, st)
		}
	}
}

func TestFaultAPILifecycle(t *testing.T) {
	url := faultServer(t)
	for _, tc := range []struct{ body, param string }{
		{`{"kind":"fallback","nope":1}`, `"param":"nope"`},
		{`{"kind":"nope"}`, `"param":"kind"`},
		{`{"kind":"latency"}`, `"param":"delay_ms"`},
		{`{"kind":"fallback","scope":{"rate":2}}`, `"param":"scope.rate"`},
	} {
		if st, body := doReq(t, "POST", url+FaultsPath, tc.body, admin...); st != 400 || !strings.Contains(body, tc.param) {
			t.Errorf("POST %s: %d %s; want 400 naming %s", tc.body, st, body, tc.param)
		}
	}
	if st, body := doReq(t, "POST", url+FaultsPath, strings.Repeat(" ", 5000), admin...); st != 413 {
		t.Errorf("a 5000-byte spec: %d %s", st, body)
	}
	st, body := doReq(t, "POST", url+FaultsPath, `{"kind":"http_error","status":418,"scope":{"request_id":"tea-*","count":1}}`, admin...)
	if st != 200 || !strings.Contains(body, `"id":1`) {
		t.Fatalf("POST http_error: %d %s", st, body)
	}
	if st, body = doReq(t, "POST", url+FaultsPath, `{"kind":"latency","delay_ms":1}`, admin...); st != 200 {
		t.Fatalf("POST latency: %d %s", st, body)
	}
	if st, body = doReq(t, "POST", url+FaultsPath, `{"kind":"fallback"}`, admin...); st != 409 {
		t.Errorf("a third fault over --max-faults 2: %d %s", st, body)
	}
	// Requests: one not matching, one matching (the fault then runs out).
	if st, body = doReq(t, "POST", url+"/v1/completions", `{"prompt":"hi","max_tokens":2}`, "X-Request-Id", "coffee-1"); st != 200 {
		t.Errorf("a request the http_error fault does not match: %d %s", st, body)
	}
	st, body = doReq(t, "POST", url+"/v1/completions", `{"prompt":"hi","max_tokens":2}`, "X-Request-Id", "tea-1")
	if st != 418 || !strings.Contains(body, "injected fault") {
		t.Errorf("the matching request: %d %s", st, body)
	}
	if st, body = doReq(t, "GET", url+FaultsPath, "", admin...); st != 200 || strings.Contains(body, `"id":1`) ||
		!strings.Contains(body, `"id":2,"spec":{"kind":"latency","delay_ms":1,"scope":{"rate":1}},"fired":1}`) {
		t.Errorf("GET after the count ran out: %d %s", st, body)
	}
	_, metrics := get(t, url+"/metrics")
	for _, want := range []string{
		`kvlease_faults_injected_total{kind="http_error",model_name="kvlease-test"} 1`,
		`kvlease_faults_injected_total{kind="latency",model_name="kvlease-test"} 1`, // not on the request the error ended,
		`kvlease_faults_injected_total{kind="expire_lease",model_name="kvlease-test"} 0`,
		`kvlease_faults_active{model_name="kvlease-test"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if st, body = doReq(t, "DELETE", url+FaultsPath+"/1", "", admin...); st != 404 {
		t.Errorf("DELETE of a spent fault: %d %s", st, body)
	}
	if st, body = doReq(t, "DELETE", url+FaultsPath+"/x", "", admin...); st != 404 {
		t.Errorf("DELETE of a bad id: %d %s", st, body)
	}
	if st, body = doReq(t, "DELETE", url+FaultsPath+"/2", "", admin...); st != 200 {
		t.Errorf("DELETE of fault 2: %d %s", st, body)
	}
	doReq(t, "POST", url+FaultsPath, `{"kind":"fallback"}`, admin...)
	if st, body = doReq(t, "DELETE", url+FaultsPath, "", admin...); st != 200 || body != `{"deleted":1}` {
		t.Errorf("DELETE all: %d %s", st, body)
	}
	if st, body = doReq(t, "PUT", url+FaultsPath, "", admin...); st != 405 {
		t.Errorf("PUT: %d %s", st, body)
	}
}

// X-Return-Error as llm-d's simulator: an integer status is the answer; a
// non-integer is a 400. Both count as http_error.
func TestReturnErrorHeader(t *testing.T) {
	url := faultServer(t)
	for _, tc := range []struct {
		hdr    string
		status int
		msg    string
	}{
		{"429", 429, "Simulated error triggered by X-Return-Error header (code 429)"},
		{"503", 503, "code 503"},
		{"abc", 400, `Invalid X-Return-Error header value \"abc\": must be an integer`},
		{"200", 400, "400..599"},
	} {
		st, body := doReq(t, "POST", url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, ReturnErrorHeader, tc.hdr)
		if st != tc.status || !strings.Contains(body, tc.msg) {
			t.Errorf("X-Return-Error %s: %d %s; want %d with %q", tc.hdr, st, body, tc.status, tc.msg)
		}
	}
	_, metrics := get(t, url+"/metrics")
	if !strings.Contains(metrics, `kvlease_faults_injected_total{kind="http_error",model_name="kvlease-test"} 4`) {
		t.Error("X-Return-Error answers are not counted as http_error")
	}
}
