package node

import (
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// flipRelay forwards connections to target. From P to D it reads frames:
// plain ones until the AUTH_ACK, then sealed ones, and it flips one byte
// in the middle of the first large sealed frame (a BLOCK) of every
// connection, counting the flips.
type flipRelay struct {
	ln      net.Listener
	target  string
	flipped atomic.Int64
}

func startFlipRelay(t *testing.T, target string) *flipRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &flipRelay{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			d, err := ln.Accept()
			if err != nil {
				return
			}
			p, err := net.Dial("tcp", target)
			if err != nil {
				d.Close()
				continue
			}
			go func() { io.Copy(p, d); p.Close() }()
			go func() { r.forward(d, p); d.Close() }()
		}
	}()
	return r
}

func (r *flipRelay) forward(d io.Writer, p io.Reader) {
	sealed, flipped := false, false
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(p, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:])) + 1
		if sealed {
			n += wire.SealOverhead
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(p, body); err != nil {
			return
		}
		if !sealed && wire.MsgType(body[0]) == wire.MsgAuthAck {
			sealed = true // P seals every frame after its AUTH_ACK
		} else if sealed && !flipped && n > 4096 {
			body[n/2] ^= 0x01
			flipped = true
			r.flipped.Add(1)
		}
		if _, err := d.Write(append(hdr[:], body...)); err != nil {
			return
		}
	}
}

// TestS33PDTamperedBlockFallsBack: a relay on the path between D and P flips
// one byte of a BLOCK frame on every connection. D's transport refuses
// the frame (it does not verify: ReasonTampered), D retries over new
// connections, then falls back with reason "tampered" and recomputes the
// prompt: its tokens are the single engine's, nothing tampered reached
// its pool.
func TestS33PDTamperedBlockFallsBack(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(5 * time.Second)
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	d := startPD(t, engine.RoleDecode, "d0", xc, nil, nil)
	ep, _ := p.TransferEndpoint()
	relay := startFlipRelay(t, ep.Addr())
	req := &engine.Request{ID: "r", Prompt: pdPrompt(21, 300), MaxTokens: 8, IgnoreEOS: true}
	g := prefill(t, p, req.ID, req.Prompt)
	in := *req
	in.Remote = ep.Remote(g)
	in.Remote.Addr = relay.ln.Addr().String()
	s, res := d.Submit(&in)
	if res != engine.Accepted {
		t.Fatalf("D refused r: %v", res)
	}
	outs := drain(t, s)
	if outs[0].Pulled || outs[0].Fallback != xfer.FallbackTampered {
		t.Errorf("first output: pulled %v, fallback %v; want a fallback for tampered", outs[0].Pulled, outs[0].Fallback)
	}
	var toks []int32
	for _, o := range outs {
		if o.Token != model.NoToken {
			toks = append(toks, o.Token)
		}
	}
	if want := reference(t, req); !slices.Equal(toks, want) {
		t.Errorf("tokens after the fallback %v, want %v", toks, want)
	}
	ds := d.Stats()
	if n := ds.Consumer.Failures[xfer.FailureTampered]; n == 0 || int64(n) != relay.flipped.Load() {
		t.Errorf("D counted %d tampered connections, the relay flipped %d frames", n, relay.flipped.Load())
	}
	if n := d.tr.Stats().Dropped[tcp.DropTampered]; n == 0 {
		t.Errorf("D's transport dropped %d connections as tampered", n)
	}
}
