package node

import (
	"errors"
	"net"
	"strconv"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/xfer"
)

// tierCopier is the loop's engine.Copier over an offload tier set.
type tierCopier struct{ set *tier.Set }

func (c tierCopier) Copy(pool *kvblock.Pool, w *offload.Work) []engine.Copied {
	var out []engine.Copied
	for _, f := range c.set.Submit(pool, w) {
		out = append(out, copied(f))
	}
	return out
}

// copied converts a tier completion for the loop.
func copied(c tier.Completion) engine.Copied {
	switch c.Kind {
	case tier.JobStore:
		return engine.Copied{Store: true, ID: offload.WorkID(c.JobID), Blocks: c.Copied}
	case tier.JobLoad:
		return engine.Copied{ID: offload.WorkID(c.JobID), Blocks: c.Copied}
	}
	panic("node: offload completion of unknown kind")
}

// pollOffload feeds the copies completed so far to the loop.
func (n *Node) pollOffload(now clock.Instant) {
	for n.completions != nil {
		select {
		case c, ok := <-n.completions:
			if !ok {
				n.completions = nil
				return
			}
			n.applyOffload(now, c)
		default:
			return
		}
	}
}

// applyOffload feeds one copy's completion to the loop. A failed copy (a
// missing or corrupt record, an I/O error, a cancelled job) is an outcome:
// the blocks not copied are dropped from the tier, or recomputed, and the
// coordinator counts them.
func (n *Node) applyOffload(now clock.Instant, c tier.Completion) {
	if c.Err != nil && !errors.Is(c.Err, tier.ErrMiss) && !errors.Is(c.Err, tier.ErrClosed) {
		n.log.Debug("offload copy failed", "kind", c.Kind.String(), "blocks", c.Copied, "reason", c.Err.Error())
	}
	n.loop.Copied(now, copied(c))
}

// closeOffload closes the tiers and applies every outstanding completion
// (queued copies are cancelled, running ones finish), then settles the
// loop, whose new copies fail at once: afterwards no store or load hold is
// left.
func (n *Node) closeOffload(now clock.Instant) {
	if n.set == nil {
		return
	}
	n.set.Close()
	if n.completions != nil {
		for c := range n.completions {
			n.applyOffload(now, c)
		}
		n.completions = nil
	}
	n.route(n.loop.Settle(now))
	if !n.loop.CopiesIdle() {
		n.log.Error("offload copies still in flight after the tiers closed")
	}
}

// OpenOffload opens the tiers of core's offload configuration (a
// host-memory arena, a directory of block files) for Config.Offload. Each
// tier's runner queue holds as many copies as the core can have in flight
// (its MaxInflightStoreBlocks + MaxInflightLoadBlocks, up to 65536), so a
// copy is not failed for lack of room. It returns nil and no error when the
// core has no offload; errors name --offload.
func OpenOffload(core *engine.Core) (*tier.Set, error) {
	co := core.Offload()
	if co == nil {
		return nil, nil
	}
	cfg := co.Config()
	rc := tier.DefaultRunnerConfig()
	rc.QueueLen = min(max(rc.QueueLen, cfg.MaxInflightStoreBlocks+cfg.MaxInflightLoadBlocks), 1<<16)
	return tier.Open(cfg, core.Config().Pool, rc)
}

// TransferEndpoint is where D engines reach a P node's transfer port: the
// remote_engine_id, remote_host and remote_port of the kv_transfer_params
// in P's responses.
type TransferEndpoint struct {
	EngineID string
	Host     string
	Port     int
}

// Addr is Host:Port, the address D dials (xfer.Remote.Addr).
func (e TransferEndpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Remote is the remote prefix a D engine is given for grant g of this
// endpoint: what a proxy carries from P's response to D's request.
func (e TransferEndpoint) Remote(g *xfer.Grant) *xfer.Remote {
	return &xfer.Remote{
		EngineID: e.EngineID, Addr: e.Addr(), Lease: g.Lease, Token: g.Token,
		NumBlocks: len(g.BlockIDs), NumTokens: g.NumTokens, ExpiresIn: g.ExpiresIn,
	}
}

// endpointOf derives a node's transfer endpoint from its listener address.
func endpointOf(engineID string, listen transport.Addr, advertise string) (TransferEndpoint, bool) {
	host, portStr, err := net.SplitHostPort(string(listen))
	if err != nil {
		return TransferEndpoint{}, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 {
		return TransferEndpoint{}, false
	}
	if advertise != "" {
		host = advertise
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return TransferEndpoint{}, false
	}
	return TransferEndpoint{EngineID: engineID, Host: host, Port: port}, true
}
