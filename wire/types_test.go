package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestTokenText(t *testing.T) {
	tk := Token{0x00, 0x01, 0xab, 0xff, 15: 0x10}
	s := tk.String()
	if s != "0001abff000000000000000000000010" {
		t.Fatalf("String = %q", s)
	}
	for _, in := range []string{s, "0001ABFF000000000000000000000010"} {
		got, err := ParseToken(in)
		if err != nil || got != tk {
			t.Fatalf("ParseToken(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "00", s[:31], s + "0", "0001abff00000000000000000000001g", " 001abff000000000000000000000010"} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseToken(%q) = %v, want ErrBadToken", bad, err)
		}
	}
	js, err := json.Marshal(struct{ T Token }{tk})
	if err != nil || string(js) != `{"T":"`+s+`"}` {
		t.Fatalf("json = %s, %v", js, err)
	}
	var back struct{ T Token }
	if err := json.Unmarshal(js, &back); err != nil || back.T != tk {
		t.Fatalf("json back = %v, %v", back.T, err)
	}
	if err := json.Unmarshal([]byte(`{"T":"xyz"}`), &back); !errors.Is(err, ErrBadToken) {
		t.Fatalf("json of a bad token: %v", err)
	}
	if !tk.Equal(tk) || tk.Equal(Token{}) || tk.IsZero() || !(Token{}).IsZero() {
		t.Fatal("Equal/IsZero")
	}
}

func TestNames(t *testing.T) {
	reasons := map[Reason]string{
		ReasonReadDone: "read_done", ReasonRejected: "rejected", ReasonAborted: "aborted",
		ReasonUndelivered: "undelivered", ReasonPeerLost: "peer_lost", ReasonExpired: "expired",
		ReasonFallback: "fallback", ReasonShutdown: "shutdown", ReasonUnclaimed: "unclaimed",
		0: "Reason(0)", 9: "Reason(9)", numReasons: "Reason(11)",
	}
	for r, want := range reasons {
		if got := r.String(); got != want {
			t.Errorf("Reason %d: %q, want %q", r, got, want)
		}
		if r.Valid() != (want[0] != 'R') {
			t.Errorf("Reason %d: Valid = %v", r, r.Valid())
		}
	}
	if got := Reasons(); len(got) != len(reasons)-3 || got[0] != ReasonReadDone || got[len(got)-1] != ReasonUnclaimed {
		t.Errorf("Reasons() = %v", got)
	}
	statuses := map[Status]string{
		StatusOK: "ok", StatusUnknownLease: "unknown_lease", StatusExpired: "expired",
		StatusReleased: "released", StatusRevoked: "revoked", StatusBadToken: "bad_token",
		StatusUnauthenticated: "unauthenticated", StatusBusy: "busy", StatusBadRequest: "bad_request",
		StatusBadChecksum: "bad_checksum", StatusInternal: "internal", StatusShuttingDown: "shutting_down",
		StatusBadVersion: "bad_version", StatusBadIndex: "bad_index", 200: "Status(200)",
	}
	for s, want := range statuses {
		if got := s.String(); got != want {
			t.Errorf("Status %d: %q, want %q", s, got, want)
		}
	}
	if len(statuses)-1 != int(numStatuses) {
		t.Errorf("test names %d statuses, package defines %d", len(statuses)-1, numStatuses)
	}
	types := map[MsgType]string{
		MsgHello: "HELLO", MsgHelloAck: "HELLO_ACK", MsgAuth: "AUTH", MsgAuthAck: "AUTH_ACK",
		MsgRenew: "RENEW", MsgRenewAck: "RENEW_ACK", MsgRead: "READ", MsgBlock: "BLOCK",
		MsgReadEnd: "READ_END", MsgRelease: "RELEASE", MsgReleaseAck: "RELEASE_ACK", MsgRevoked: "REVOKED",
		0: "MsgType(0)", 13: "MsgType(13)",
	}
	for mt, want := range types {
		if got := mt.String(); got != want {
			t.Errorf("MsgType %d: %q, want %q", mt, got, want)
		}
	}
}
