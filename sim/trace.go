package sim

import (
	"sort"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// Inspection and the trace hash.

// Held is the number of blocks held on node name.
func (c *World) Held(name string) int { return c.Node(name).Core.Pool().NumHeld() }

// Leases is the number of live leases on node name.
func (c *World) Leases(name string) int {
	if p := c.Node(name).Core.Producer(); p != nil {
		return p.NumLeases()
	}
	return 0
}

// Ordered returns the requests in submission order.
func (c *World) Ordered() []*Req {
	out := make([]*Req, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, c.Requests[id])
	}
	return out
}

// sortedNames is used where map order would leak into behaviour.
func sortedNames(m map[string]*Req) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TraceHash is a hash of everything that happened so far, in order:
// deliveries, outputs, releases, faults. Two runs of the same seed must
// give the same hash.
func (c *World) TraceHash() uint64 { return c.trace }

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

const (
	traceSubmit uint64 = iota + 1
	traceAbort
	traceFail
	traceOutput
	traceRelease
	traceReadEnd
	traceDeliver
	traceCrash
	traceRestart
	traceHang
	traceResume
	tracePartition
	traceDrain
	traceExit
	traceReset
	traceOffload
	traceInjected
	tracePause
	traceUnpause
)

func (c *World) mix(vals ...uint64) {
	h := c.trace
	for _, v := range vals {
		h = fnvMix(h, v)
	}
	c.trace = fnvMix(h, uint64(c.Now))
	c.Events++
}

// fnvMix is FNV-1a over v's eight bytes, low first.
func fnvMix(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

func (c *World) mixEvent(ev transport.Event) {
	var a, b uint64
	var typ wire.MsgType
	switch m := ev.Msg.(type) {
	case nil:
	case *wire.Renew:
		a, b = m.Seq, uint64(len(m.Leases))
	case *wire.RenewAck:
		a, b = m.Seq, uint64(len(m.Results))
	case *wire.Read:
		a, b = m.ReadID, uint64(m.Lease)
	case *wire.Block:
		a, b = m.ReadID, uint64(m.Index)<<32|uint64(m.Checksum&0xffffffff)
	case *wire.ReadEnd:
		a, b = m.ReadID, uint64(m.Status)
	case *wire.Release:
		a, b = uint64(m.Lease), uint64(m.Reason)
	case *wire.ReleaseAck:
		a, b = uint64(m.Lease), uint64(m.Status)
	case *wire.Revoked:
		a, b = uint64(m.Lease), uint64(m.Reason)
	}
	if ev.Msg != nil {
		typ = ev.Msg.Type()
	}
	c.mix(traceDeliver, uint64(ev.Kind), uint64(ev.Conn), hashString(string(ev.Local)), uint64(typ), a, b)
}

func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
