package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

var answerCases = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\ncontent-type:text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:\r\n0\r\nX-T: 1\r\n\r\n",
	"HTTP/1.1 503 Service Unavailable\r\nRetry-After:  7 \r\nContent-Length: 4\r\n\r\nbusy",
	"HTTP/1.1 429 \r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
	"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\n\r\nto the end",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n1\r\nx\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
	"HTTP/1.1 2000 OK\r\n\r\n",
	"HTTP/2.0 200 OK\r\n\r\n",
	"HTTP/1.1 abc OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
	"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",
	"HTTP/1.1 200 OK\r\nContent-Type: text/x\r\n",
}

// readAnswer reads one answer from s with readAnswerHead and its body.
func readAnswer(s string) (*http.Response, []byte, error) {
	br := bufio.NewReaderSize(strings.NewReader(s), 4096)
	h, err := readAnswerHead(br)
	if err != nil {
		return nil, nil, err
	}
	body := newAnswerBody(br, &h)
	resp := new(http.Response)
	h.fill(resp, io.NopCloser(&body))
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// checkAnswer checks that what readAnswerHead accepts net/http reads the
// same: status, kept headers, length, Close and body.
func checkAnswer(t *testing.T, s string) {
	t.Helper()
	got, gotBody, err := readAnswer(s)
	if err != nil {
		return // refusing is allowed: the leg fails with a 502
	}
	want, werr := http.ReadResponse(bufio.NewReader(strings.NewReader(s)), nil)
	if werr != nil {
		t.Fatalf("%q: readAnswerHead accepted what net/http refuses: %v", s, werr)
	}
	wantBody, berr := io.ReadAll(want.Body)
	if berr != nil {
		t.Fatalf("%q: readAnswerHead read a body net/http fails on: %v", s, berr)
	}
	switch {
	case got.StatusCode != want.StatusCode, got.Header.Get("Content-Type") != want.Header.Get("Content-Type"),
		got.Header.Get("Retry-After") != want.Header.Get("Retry-After"),
		got.ContentLength != want.ContentLength && !(got.StatusCode == 204 && want.ContentLength <= 0),
		got.Close != want.Close, string(gotBody) != string(wantBody):
		t.Fatalf("%q: read as %d %q %q len %d close %v te %v body %q; net/http: %d %q %q len %d close %v te %v body %q", s,
			got.StatusCode, got.Header.Get("Content-Type"), got.Header.Get("Retry-After"), got.ContentLength, got.Close, got.TransferEncoding, gotBody,
			want.StatusCode, want.Header.Get("Content-Type"), want.Header.Get("Retry-After"), want.ContentLength, want.Close, want.TransferEncoding, wantBody)
	case !isSuccess(got.StatusCode) && got.Status != want.Status:
		t.Fatalf("%q: status %q, net/http %q", s, got.Status, want.Status)
	}
}

func TestReadAnswerHead(t *testing.T) {
	refused := 0
	for _, s := range answerCases {
		checkAnswer(t, s)
		if _, _, err := readAnswer(s); err != nil {
			refused++
		}
	}
	for _, s := range answerCases[:5] {
		if _, _, err := readAnswer(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if refused < 10 {
		t.Errorf("only %d malformed answers refused", refused)
	}
	resp, _, _ := readAnswer(answerCases[2])
	if resp.Status != "503 Service Unavailable" || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("503: %q %q", resp.Status, resp.Header.Get("Retry-After"))
	}
}

func FuzzAnswerHead(f *testing.F) {
	for _, s := range answerCases {
		f.Add(s)
	}
	f.Fuzz(checkAnswer)
}
