package node

import (
	"errors"
	"strconv"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// The P/D hand-off as an HTTP edge speaks it. A decode leg names the
// remote prefix it pulls (vLLM's kv_transfer_params); a prefill answer
// carries the lease it granted. The edge parses and writes the JSON; what
// a lease id, a token and a remote prefix are is decided here, so the edge
// never builds the transfer module's values itself.

// LeaseIDHexLen is the length of a lease id as the HTTP API writes it: 16
// hex digits.
const LeaseIDHexLen = 16

// Pull is what a decode leg says of the remote prefix to pull.
type Pull struct {
	// EngineID is the prefill engine's id (remote_engine_id).
	EngineID string
	// Addr is its transfer endpoint, host:port.
	Addr string
	// LeaseID is the lease's id, LeaseIDHexLen hex digits.
	LeaseID string
	// Token is the lease token (lease_token).
	Token [16]byte
	// NumBlocks is the number of blocks leased (len(remote_block_ids)),
	// NumTokens the prompt tokens they hold.
	NumBlocks, NumTokens int
	// ExpiresIn is how long the lease had left when P answered; 0 when
	// unknown, and then the engine's own lease duration is assumed (a
	// wrong guess only delays D's fallback, never frees P's blocks).
	ExpiresIn time.Duration
}

// ErrLeaseID is PullRemote's error for a lease id that is not
// LeaseIDHexLen hex digits, or is all zero.
var ErrLeaseID = errors.New("a lease id is " + strconv.Itoa(LeaseIDHexLen) + " hex digits, not all zero")

// ParseLeaseID reports whether s is a lease id as the HTTP API writes
// it.
func ParseLeaseID(s string) bool {
	_, err := parseLeaseID(s)
	return err == nil
}

func parseLeaseID(s string) (wire.LeaseID, error) {
	if len(s) != LeaseIDHexLen {
		return 0, ErrLeaseID
	}
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil || n == 0 {
		return 0, ErrLeaseID
	}
	return wire.LeaseID(n), nil
}

// PullRemote sets req's remote prefix to p, for an engine configured as
// cfg (whose lease duration stands for an unknown ExpiresIn): the request then pulls it from the prefill engine instead of
// computing its prompt, and a refusal of req tells that engine (Reject).
func PullRemote(req *engine.Request, p Pull, cfg engine.Config) error {
	id, err := parseLeaseID(p.LeaseID)
	if err != nil {
		return err
	}
	if p.ExpiresIn <= 0 && cfg.Transfer != nil {
		p.ExpiresIn = cfg.Transfer.LeaseDuration
	}
	req.Remote = &xfer.Remote{
		EngineID:  p.EngineID,
		Addr:      p.Addr,
		Lease:     id,
		Token:     wire.Token(p.Token),
		NumBlocks: p.NumBlocks,
		NumTokens: p.NumTokens,
		ExpiresIn: p.ExpiresIn,
	}
	return nil
}

// RemoteBlocks returns the number of blocks and prompt tokens of req's
// remote prefix, ok false when it has none.
func RemoteBlocks(req *engine.Request) (blocks, tokens int, ok bool) {
	if req == nil || req.Remote == nil {
		return 0, 0, false
	}
	return req.Remote.NumBlocks, req.Remote.NumTokens, true
}

// RejectNotice returns a request the core refuses (it has no prompt) and
// that carries req's remote prefix: submitting it makes the core tell the
// prefill engine, as Reject does, for an engine that offers no Reject.
func RejectNotice(req *engine.Request) *engine.Request {
	id := "reject"
	if req.Remote != nil {
		id += "-" + strconv.FormatUint(uint64(req.Remote.Lease), 16)
	}
	return &engine.Request{ID: id, Remote: req.Remote}
}

// Lease is a lease a prefill engine granted, as its answer carries it.
type Lease struct {
	// ID is the lease's id, LeaseIDHexLen hex digits.
	ID string
	// Token is the lease token, 32 hex digits.
	Token string
	// BlockIDs are P's block ids in prompt order (remote_block_ids).
	BlockIDs []int32
	// NumTokens is the prompt tokens the blocks hold.
	NumTokens int
	// ExpiresIn is the lease's duration at its grant.
	ExpiresIn time.Duration
}

// Granted returns the lease o granted (o finished a request that asked
// for a remote decode), ok false when it granted none.
func Granted(o *engine.Output) (l Lease, ok bool) {
	g := o.Grant
	if g == nil {
		return Lease{}, false
	}
	ids := make([]int32, len(g.BlockIDs))
	for i, b := range g.BlockIDs {
		ids[i] = int32(b)
	}
	return Lease{ID: g.Lease.Hex(), Token: g.Token.String(), BlockIDs: ids, NumTokens: g.NumTokens, ExpiresIn: g.ExpiresIn}, true
}
