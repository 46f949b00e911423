package httpapi

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
)

// LeaseIDField is the kv_transfer_params field carrying the lease id: 16
// hex digits. openai.KVTransferParams keeps it among its pass-through
// extras, so proxies carry it unchanged.
const LeaseIDField = "lease_id"

// LoRADigestField is the kv_transfer_params field in which a prefill
// engine that ran a LoRA adapter names the adapter's files: the digest of
// engine.Adapter, 16 hex digits. A decode engine whose adapter of that
// name has other files would decode the pulled KV with other weights —
// an answer no single engine gives — so it refuses the request. A prefill
// engine that sends no digest (not kvlease, or the base model) is not
// checked.
const LoRADigestField = "lora_digest"

// setRemote sets req's remote prefix, the one a decode engine must pull
// for params. It sets none when there is none to pull here: no params, no
// do_remote_prefill, or an engine without a transfer consumer (the request
// is then computed locally and the params are ignored, as vLLM ignores
// them without a KV connector). promptLen is the prompt's length in
// tokens; it stands for remote_num_tokens when that is absent. The params
// were validated by the openai parser; what it does not know (lease_id,
// the peers allowed) is checked here.
func (s *Server) setRemote(req *engine.Request, kv *openai.KVTransferParams, promptLen int) *openai.Error {
	if kv == nil || !kv.DoRemotePrefill || !s.consumer {
		return nil
	}
	id, e := leaseID(kv)
	if e != nil {
		return e
	}
	tok, ok := kv.LeaseTokenBytes()
	if !ok { // Validate requires a well-formed token with do_remote_prefill
		return openai.BadRequest("kv_transfer_params.lease_token", "kv_transfer_params.lease_token must be %d hex digits", openai.LeaseTokenHexLen)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(kv.RemoteHost, "["), "]")
	if p := s.cfg.KVPeers; p != nil && !p.Allow(host, kv.RemotePort) {
		return openai.BadRequest("kv_transfer_params.remote_host",
			"kv_transfer_params names the prefill endpoint %s, which this engine's --kv-peers (%s) does not allow",
			net.JoinHostPort(host, strconv.Itoa(kv.RemotePort)), p)
	}
	n := kv.RemoteNumTokens
	if n == 0 {
		n = promptLen
	}
	err := node.PullRemote(req, node.Pull{
		EngineID:  kv.RemoteEngineID,
		Addr:      net.JoinHostPort(host, strconv.Itoa(kv.RemotePort)),
		LeaseID:   id,
		Token:     tok,
		NumBlocks: len(kv.RemoteBlockIDs),
		NumTokens: n,
		ExpiresIn: time.Duration(kv.LeaseExpiresInMS) * time.Millisecond,
	}, s.ecfg)
	if err != nil { // leaseID checked it
		return openai.BadRequest("kv_transfer_params."+LeaseIDField, "kv_transfer_params.%s: %v", LeaseIDField, err)
	}
	return nil
}

// leaseID reads kv_transfer_params.lease_id.
func leaseID(kv *openai.KVTransferParams) (string, *openai.Error) {
	const param = "kv_transfer_params." + LeaseIDField
	for _, x := range kv.Extra {
		if x.Key != LeaseIDField {
			continue
		}
		v := string(x.Value)
		if len(v) != node.LeaseIDHexLen+2 || v[0] != '"' || v[len(v)-1] != '"' {
			return "", openai.BadRequest(param, "%s must be a string of %d hex digits", param, node.LeaseIDHexLen)
		}
		if !node.ParseLeaseID(v[1 : len(v)-1]) {
			return "", openai.BadRequest(param, "%s must be a string of %d hex digits, not all zero", param, node.LeaseIDHexLen)
		}
		return v[1 : len(v)-1], nil
	}
	return "", openai.BadRequest(param, "%s is required when do_remote_prefill is true", param)
}

// grantParams returns the kv_transfer_params of a prefill response that
// leased its prompt's blocks (l, granted at instant at): what a decode
// engine needs to pull them.
func (s *Server) grantParams(id string, l node.Lease, a engine.Adapter, at, now clock.Instant) *openai.KVTransferParams {
	left := l.ExpiresIn - now.Sub(at)
	kv := &openai.KVTransferParams{
		DoRemotePrefill:  true,
		RemoteEngineID:   s.endpoint.EngineID,
		RemoteRequestID:  id,
		RemoteHost:       s.endpoint.Host,
		RemotePort:       s.endpoint.Port,
		RemoteBlockIDs:   l.BlockIDs,
		TPSize:           1,
		RemoteNumTokens:  l.NumTokens,
		LeaseToken:       l.Token,
		LeaseExpiresInMS: max(left.Milliseconds(), 1),
		Extra:            []openai.KVExtraField{{Key: LeaseIDField, Value: []byte(`"` + l.ID + `"`)}},
	}
	if !a.IsBase() {
		kv.Extra = append(kv.Extra, openai.KVExtraField{Key: LoRADigestField, Value: []byte(fmt.Sprintf(`"%016x"`, a.Digest))})
	}
	return kv
}

// checkLoRADigest refuses a decode leg whose prefill ran adapter files
// other than those of a, the request's adapter here (see
// LoRADigestField).
func checkLoRADigest(kv *openai.KVTransferParams, a engine.Adapter) *openai.Error {
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

// reject tells the prefill engine that owns req's remote prefix that this
// engine refused req before admitting it, so P frees the blocks at once
// (RELEASE rejected). A nil req, or one without a remote prefix, is a
// no-op. Sending the notice twice is harmless: the consumer keeps one per
// lease.
func (s *Server) reject(req *engine.Request) {
	if _, _, ok := node.RemoteBlocks(req); !ok {
		return
	}
	if rj, ok := s.eng.(Rejecter); ok {
		rj.Reject(req)
		return
	}
	// A request with no prompt is refused by the core, which then sends
	// the notice for its Remote. The node refuses it itself, without the
	// core, while draining.
	s.eng.Start(node.RejectNotice(req), node.SubmitOptions{})
}
