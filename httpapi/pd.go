package httpapi

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
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

// LoRADigestField is the kv_transfer_params field in which a prefill
// engine that ran a LoRA adapter names the adapter's files: the digest of
// kvblock.Adapter, 16 hex digits. A decode engine whose adapter of that
// name has other files would decode the pulled KV with other weights —
// an answer no single engine gives — so it refuses the request. A prefill
// engine that sends no digest (not kvlease, or the base model) is not
// checked.
const LoRADigestField = "lora_digest"

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
	if p := s.cfg.KVPeers; p != nil && !p.Allow(host, kv.RemotePort) {
		return nil, openai.BadRequest("kv_transfer_params.remote_host",
			"kv_transfer_params names the prefill endpoint %s, which this engine's --kv-peers (%s) does not allow",
			net.JoinHostPort(host, strconv.Itoa(kv.RemotePort)), p)
	}
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
func (s *Server) grantParams(id string, g *xfer.Grant, a kvblock.Adapter, at, now clock.Instant) *openai.KVTransferParams {
	ids := make([]int32, len(g.BlockIDs))
	for i, b := range g.BlockIDs {
		ids[i] = int32(b)
	}
	left := g.ExpiresIn - now.Sub(at)
	kv := &openai.KVTransferParams{
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
	if !a.IsBase() {
		kv.Extra = append(kv.Extra, openai.KVExtraField{Key: LoRADigestField, Value: []byte(fmt.Sprintf(`"%016x"`, a.Digest))})
	}
	return kv
}

// checkLoRADigest refuses a decode leg whose prefill ran adapter files
// other than those of a, the request's adapter here (see
// LoRADigestField).
func checkLoRADigest(kv *openai.KVTransferParams, a kvblock.Adapter) *openai.Error {
	const param = "kv_transfer_params." + LoRADigestField
	for _, x := range kv.Extra {
		if x.Key != LoRADigestField {
			continue
		}
		v := string(x.Value)
		var d uint64
		var err error
		if len(v) == 18 && v[0] == '"' && v[17] == '"' {
			d, err = strconv.ParseUint(v[1:17], 16, 64)
		}
		switch {
		case len(v) != 18 || v[0] != '"' || v[17] != '"' || err != nil:
			return openai.BadRequest(param, "%s must be a string of 16 hex digits", param)
		case a.IsBase():
			return openai.BadRequest(param, "the prefill engine ran a LoRA adapter, this request asks for the base model: send both legs the same model")
		case d != a.Digest:
			return openai.BadRequest(param, "the prefill engine ran LoRA adapter '%s' from other files than this engine's (digest %016x there, %016x here): serve the same adapter files on every engine", a.Name, d, a.Digest)
		}
		return nil
	}
	return nil
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
