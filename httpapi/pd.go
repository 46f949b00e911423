package httpapi

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// LeaseIDField is the kv_transfer_params field carrying the lease id: 16
// hex digits. openai.KVTransferParams keeps it among its pass-through
// extras, so proxies carry it unchanged.
const LeaseIDField = "lease_id"

// leaseIDHexLen is the length of a lease_id.
const leaseIDHexLen = 16

// remote returns the remote prefix a decode engine must pull for params,
// or nil when there is none to pull here: no params, no do_remote_prefill,
// or an engine without a transfer consumer (the request is then computed
// locally and the params are ignored, as vLLM ignores them without a KV
// connector). promptLen is the prompt's length in tokens; it stands for
// remote_num_tokens when that is absent. The params were validated by the
// openai parser; what it does not know (lease_id) is checked here.
func (s *Server) remote(kv *openai.KVTransferParams, promptLen int) (*xfer.Remote, *openai.Error) {
	if kv == nil || !kv.DoRemotePrefill || !s.consumer {
		return nil, nil
	}
	id, e := leaseID(kv)
	if e != nil {
		return nil, e
	}
	tok, ok := kv.LeaseTokenBytes()
	if !ok { // Validate requires a well-formed token with do_remote_prefill
		return nil, openai.BadRequest("kv_transfer_params.lease_token", "kv_transfer_params.lease_token must be %d hex digits", openai.LeaseTokenHexLen)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(kv.RemoteHost, "["), "]")
	n := kv.RemoteNumTokens
	if n == 0 {
		n = promptLen
	}
	expires := time.Duration(kv.LeaseExpiresInMS) * time.Millisecond
	if expires <= 0 {
		// Unknown: assume a fresh lease of this engine's own policy. A
		// wrong guess only delays D's fallback, never frees P's blocks.
		expires = s.ecfg.Transfer.LeaseDuration
	}
	return &xfer.Remote{
		EngineID:  kv.RemoteEngineID,
		Addr:      net.JoinHostPort(host, strconv.Itoa(kv.RemotePort)),
		Lease:     id,
		Token:     wire.Token(tok),
		NumBlocks: len(kv.RemoteBlockIDs),
		NumTokens: n,
		ExpiresIn: expires,
	}, nil
}

// leaseID reads kv_transfer_params.lease_id.
func leaseID(kv *openai.KVTransferParams) (wire.LeaseID, *openai.Error) {
	const param = "kv_transfer_params." + LeaseIDField
	for _, x := range kv.Extra {
		if x.Key != LeaseIDField {
			continue
		}
		v := string(x.Value)
		if len(v) != leaseIDHexLen+2 || v[0] != '"' || v[len(v)-1] != '"' {
			return 0, openai.BadRequest(param, "%s must be a string of %d hex digits", param, leaseIDHexLen)
		}
		n, err := strconv.ParseUint(v[1:len(v)-1], 16, 64)
		if err != nil || n == 0 {
			return 0, openai.BadRequest(param, "%s must be a string of %d hex digits, not all zero", param, leaseIDHexLen)
		}
		return wire.LeaseID(n), nil
	}
	return 0, openai.BadRequest(param, "%s is required when do_remote_prefill is true", param)
}

// grantParams returns the kv_transfer_params of a prefill response that
// leased its prompt's blocks: what a decode engine needs to pull them.
func (s *Server) grantParams(id string, g *xfer.Grant, at, now clock.Instant) *openai.KVTransferParams {
	ids := make([]int32, len(g.BlockIDs))
	for i, b := range g.BlockIDs {
		ids[i] = int32(b)
	}
	left := g.ExpiresIn - now.Sub(at)
	return &openai.KVTransferParams{
		DoRemotePrefill:  true,
		RemoteEngineID:   s.endpoint.EngineID,
		RemoteRequestID:  id,
		RemoteHost:       s.endpoint.Host,
		RemotePort:       s.endpoint.Port,
		RemoteBlockIDs:   ids,
		TPSize:           1,
		RemoteNumTokens:  g.NumTokens,
		LeaseToken:       g.Token.String(),
		LeaseExpiresInMS: max(left.Milliseconds(), 1),
		Extra:            []openai.KVExtraField{{Key: LeaseIDField, Value: []byte(`"` + g.Lease.Hex() + `"`)}},
	}
}

// reject tells the prefill engine that owns r that this engine refused the
// request before admitting it, so P frees the blocks at once (RELEASE
// rejected). A nil r is a no-op. Sending the notice twice is harmless: the
// consumer keeps one per lease.
func (s *Server) reject(r *xfer.Remote) {
	if r == nil {
		return
	}
	if rj, ok := s.eng.(Rejecter); ok {
		rj.Reject(r)
		return
	}
	// A request with no prompt is refused by the core, which then sends
	// the notice for its Remote. The node refuses it itself, without the
	// core, while draining.
	s.eng.Start(&engine.Request{ID: "reject-" + strconv.FormatUint(uint64(r.Lease), 16), Remote: r}, node.SubmitOptions{})
}
