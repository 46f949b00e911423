package transport

import (
	"testing"

	"github.com/kvlease/kvlease/wire"
)

func TestEventKindString(t *testing.T) {
	want := map[EventKind]string{
		Dialed:        "dialed",
		Accepted:      "accepted",
		DialFailed:    "dial_failed",
		Received:      "received",
		Closed:        "closed",
		Sent:          "sent",
		0:             "EventKind(0)",
		numEventKinds: "EventKind(7)",
	}
	for k, s := range want {
		if got := k.String(); got != s {
			t.Errorf("%d.String() = %q, want %q", uint8(k), got, s)
		}
		if k.Valid() != (k >= Dialed && k <= Sent) {
			t.Errorf("%v.Valid() = %v", k, k.Valid())
		}
	}
}

func TestEventString(t *testing.T) {
	e := Event{Kind: Received, Conn: 7, Local: "p", Remote: "d", Msg: &wire.Renew{}}
	if got, want := e.String(), "received conn=7 p<-d msg=RENEW"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e = Event{Kind: Closed, Conn: 7, Local: "d", Remote: "p", Reason: "peer crashed"}
	if got, want := e.String(), `closed conn=7 d<-p reason="peer crashed"`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
