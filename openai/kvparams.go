package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// BlockIDsForm records how remote_block_ids was written, so it is written
// back the same way.
type BlockIDsForm uint8

const (
	// FlatBlockIDs is a plain list: [3, 4, 5]. kvlease writes this form.
	FlatBlockIDs BlockIDsForm = iota
	// GroupedBlockIDs is vLLM's per-KV-cache-group list of lists with one
	// group: [[3, 4, 5]].
	GroupedBlockIDs
)

// Limits of kv_transfer_params. Requests over them get a 400.
const (
	// MaxKVExtraFields bounds the unknown fields kept for pass-through.
	MaxKVExtraFields = 64
	// MaxRemoteBlockIDs bounds remote_block_ids (2^20 blocks is 16 M
	// tokens at 16 tokens per block, far beyond any prompt).
	MaxRemoteBlockIDs = 1 << 20
	// MaxKVIDBytes bounds remote_engine_id, remote_request_id and
	// remote_host.
	MaxKVIDBytes = 256
	// LeaseTokenHexLen is the length of lease_token: 128 bits in hex.
	LeaseTokenHexLen = 32
	// MaxLeaseExpiresInMS bounds lease_expires_in_ms, which a decode
	// engine turns into a time.Duration (its view of the lease's expiry,
	// and so how long a pull may wait): one day, far beyond any lease
	// (30 s by default, 480 s under legacy-timeout), and far below a
	// Duration's overflow (about 9.2e12 ms). kvlease serve refuses a
	// --kv-lease above it.
	MaxLeaseExpiresInMS = 24 * 60 * 60 * 1000
)

// KVTransferParams is vLLM's kv_transfer_params, the P/D contract carried
// through proxies in request and response bodies (see docs/protocol.md,
// "HTTP: kv_transfer_params"), plus kvlease's lease fields.
//
// A zero string or number means absent (JSON null or missing): vLLM never
// sends an empty engine id, host or request id, port 0, tp_size 0 or zero
// remote tokens, so nothing is lost. RemoteBlockIDs distinguishes nil
// (null) from empty ([]).
type KVTransferParams struct {
	DoRemoteDecode  bool   // do_remote_decode: P keeps the blocks for a remote decoder
	DoRemotePrefill bool   // do_remote_prefill: D pulls the prompt's blocks from P
	RemoteEngineID  string // remote_engine_id: P's engine id
	RemoteRequestID string // remote_request_id: P's request id
	RemoteHost      string // remote_host: P's transfer endpoint
	RemotePort      int    // remote_port
	// RemoteBlockIDs is remote_block_ids normalized to one flat list;
	// BlockIDsForm remembers whether it came as [..] or [[..]].
	RemoteBlockIDs []int32
	BlockIDsForm   BlockIDsForm
	TPSize         int // tp_size
	// RemoteNumTokens is remote_num_tokens: prompt tokens whose KV P holds.
	RemoteNumTokens int
	// LeaseToken is kvlease's lease_token: 32 hex digits that authorize
	// reading and releasing the lease. Only the response carrying it
	// knows it.
	LeaseToken string
	// LeaseExpiresInMS is kvlease's lease_expires_in_ms: the lease's
	// remaining time when P answered.
	LeaseExpiresInMS int64
	// Extra holds every other field, in input order, with its value as
	// compact JSON, written back unchanged after the known fields.
	Extra []KVExtraField
}

// KVExtraField is a kv_transfer_params field kvlease does not interpret.
type KVExtraField struct {
	Key   string
	Value json.RawMessage // valid JSON; nil is written as null
}

const kvParam = "kv_transfer_params"

// knownKVField reports whether key is one of the fields KVTransferParams
// models (and so never an extra).
func knownKVField(key string) bool {
	switch key {
	case "do_remote_decode", "do_remote_prefill", "remote_engine_id", "remote_request_id",
		"remote_host", "remote_port", "remote_block_ids", "tp_size", "remote_num_tokens",
		"lease_token", "lease_expires_in_ms":
		return true
	}
	return false
}

// ParseKVTransferParams parses a kv_transfer_params value. Absent or null
// gives (nil, nil). It checks types and simple ranges (non-negative numbers,
// port ≤ 65535, size limits); Validate checks what a decode engine needs.
// Keys match exactly, as in vLLM; a key that appears twice keeps its last
// value.
func ParseKVTransferParams(raw json.RawMessage) (*KVTransferParams, *Error) {
	return parseKVTransferParams(bytes.TrimSpace(raw), false)
}

// parseKVTransferParams is ParseKVTransferParams of raw without space
// around it; valid says it is valid JSON (a request body's member).
func parseKVTransferParams(raw json.RawMessage, valid bool) (*KVTransferParams, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, BadRequest(kvParam, "kv_transfer_params must be an object or null")
	}
	if !valid && !Valid(raw) {
		return decodeKVTransferParams(raw) // the decoder says where
	}
	// The members read in place, in one pass, as the decoder below would
	// give them, at a fraction of its CPU: a decode engine parses these on
	// every request. raw is valid JSON: the scan need not check it.
	p := &KVTransferParams{}
	for i := skipSpace(raw, 1); i < len(raw) && raw[i] == '"'; {
		kend := skipString(raw, i)
		key := raw[i+1 : kend-1]
		for _, c := range key {
			if !plainASCII[c] { // an escape or UTF-8, perhaps invalid: as written may not be as meant
				k, _ := readString(raw, i)
				key = []byte(k)
				break
			}
		}
		i = skipSpace(raw, skipSpace(raw, kend)+1) // past ':'
		end, e := p.setFieldAt(key, raw, i)
		if e != nil {
			return nil, e
		}
		if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return p, nil
}

// decodeKVTransferParams is ParseKVTransferParams of raw, an object's
// text, member by member with encoding/json's decoder.
func decodeKVTransferParams(raw json.RawMessage) (*KVTransferParams, *Error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, BadRequest(kvParam, "kv_transfer_params is not valid JSON: %v", err)
	}
	p := &KVTransferParams{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, BadRequest(kvParam, "kv_transfer_params is not valid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok { // unreachable for valid JSON: object keys are strings
			return nil, BadRequest(kvParam, "kv_transfer_params is not valid JSON")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, BadRequest(kvParam, "kv_transfer_params is not valid JSON: %v", err)
		}
		if e := p.setField([]byte(key), v); e != nil {
			return nil, e
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, BadRequest(kvParam, "kv_transfer_params is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, BadRequest(kvParam, "kv_transfer_params is not valid JSON: data after the object")
	}
	return p, nil
}

// setField sets the field key to v, valid JSON.
func (p *KVTransferParams) setField(key []byte, v json.RawMessage) *Error {
	_, e := p.setFieldAt(key, v, 0)
	return e
}

// setFieldAt sets the field key to the value at b[i], in valid JSON, and
// returns the index past it.
func (p *KVTransferParams) setFieldAt(key []byte, b []byte, i int) (end int, e *Error) {
	switch string(key) {
	case "do_remote_decode":
		p.DoRemoteDecode, end, e = parseBool(key, b, i)
	case "do_remote_prefill":
		p.DoRemotePrefill, end, e = parseBool(key, b, i)
	case "remote_engine_id":
		p.RemoteEngineID, end, e = parseID(key, b, i)
	case "remote_request_id":
		p.RemoteRequestID, end, e = parseID(key, b, i)
	case "remote_host":
		p.RemoteHost, end, e = parseID(key, b, i)
	case "remote_port":
		var n int64
		n, end, e = parseCount(key, b, i, 65535)
		p.RemotePort = int(n)
	case "tp_size":
		var n int64
		n, end, e = parseCount(key, b, i, 1<<20)
		p.TPSize = int(n)
	case "remote_num_tokens":
		var n int64
		n, end, e = parseCount(key, b, i, 1<<40)
		p.RemoteNumTokens = int(n)
	case "lease_expires_in_ms":
		p.LeaseExpiresInMS, end, e = parseCount(key, b, i, MaxLeaseExpiresInMS)
	case "lease_token":
		p.LeaseToken, end, e = parseID(key, b, i)
	case "remote_block_ids":
		p.RemoteBlockIDs, p.BlockIDsForm, end, e = parseBlockIDs(key, b, i)
	default:
		end = skipValue(b, i)
		var buf bytes.Buffer
		if err := json.Compact(&buf, b[i:end]); err != nil { // unreachable: b is valid
			param := kvFieldParam(key)
			return end, BadRequest(param, "%s is not valid JSON", param)
		}
		for j := range p.Extra {
			if p.Extra[j].Key == string(key) {
				p.Extra[j].Value = buf.Bytes()
				return end, nil
			}
		}
		if len(p.Extra) >= MaxKVExtraFields {
			return end, BadRequest(kvParam, "kv_transfer_params has more than %d unknown fields", MaxKVExtraFields)
		}
		p.Extra = append(p.Extra, KVExtraField{Key: string(key), Value: buf.Bytes()})
	}
	return end, e
}

// kvFieldParam names the field key of kv_transfer_params in errors.
func kvFieldParam(key []byte) string { return kvParam + "." + string(key) }

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// The readers of the fields take the value at b[i], in valid JSON, and
// return the index past it.

func parseBool(key []byte, b []byte, i int) (bool, int, *Error) {
	switch {
	case isLiteral(b, i, "true"):
		return true, i + 4, nil
	case isLiteral(b, i, "false"):
		return false, i + 5, nil
	case isLiteral(b, i, "null"):
		return false, i + 4, nil
	}
	param := kvFieldParam(key)
	return false, -1, BadRequest(param, "%s must be a boolean or null", param)
}

// parseID parses a string field bounded by MaxKVIDBytes.
func parseID(key []byte, b []byte, i int) (string, int, *Error) {
	if isLiteral(b, i, "null") {
		return "", i + 4, nil
	}
	s, end := readString(b, i)
	if end < 0 {
		param := kvFieldParam(key)
		return "", -1, BadRequest(param, "%s must be a string or null", param)
	}
	if len(s) > MaxKVIDBytes {
		param := kvFieldParam(key)
		return "", -1, BadRequest(param, "%s is longer than %d bytes", param, MaxKVIDBytes)
	}
	return s, end, nil
}

// parseCount parses a non-negative integer no larger than max. Only integer
// literals are accepted ("8000", not "8000.0" or "8e3").
func parseCount(key []byte, b []byte, i int, max int64) (int64, int, *Error) {
	if isLiteral(b, i, "null") {
		return 0, i + 4, nil
	}
	n, end := readInt(b, i, 64)
	if end < 0 {
		param := kvFieldParam(key)
		return 0, -1, BadRequest(param, "%s must be an integer or null", param)
	}
	if n < 0 || n > max {
		param := kvFieldParam(key)
		return 0, -1, BadRequest(param, "%s must be between 0 and %d, got %d", param, max, n)
	}
	return n, end, nil
}

func parseBlockIDs(key []byte, b []byte, i int) ([]int32, BlockIDsForm, int, *Error) {
	if isLiteral(b, i, "null") {
		return nil, FlatBlockIDs, i + 4, nil
	}
	bad := func() ([]int32, BlockIDsForm, int, *Error) {
		param := kvFieldParam(key)
		return nil, FlatBlockIDs, -1, BadRequest(param,
			"%s must be a list of block ids, a list of one list of block ids, or null", param)
	}
	if b[i] != '[' {
		return bad()
	}
	form := FlatBlockIDs
	var ids []int32
	var end int
	if j := skipSpace(b, i+1); b[j] == '[' {
		groups, n := readTokenBatch(b[i:])
		if n < 0 {
			return bad()
		}
		if len(groups) != 1 {
			param := kvFieldParam(key)
			return nil, FlatBlockIDs, -1, BadRequest(param,
				"%s has %d KV cache groups; kvlease supports exactly one", param, len(groups))
		}
		form, ids, end = GroupedBlockIDs, groups[0], i+n
	} else if ids, end = readInt32s(b, i); end < 0 {
		return bad()
	}
	if ids == nil {
		ids = []int32{} // present but empty, as opposed to null
	}
	if len(ids) > MaxRemoteBlockIDs {
		param := kvFieldParam(key)
		return nil, FlatBlockIDs, -1, BadRequest(param, "%s has more than %d block ids", param, MaxRemoteBlockIDs)
	}
	for _, id := range ids {
		if id < 0 {
			param := kvFieldParam(key)
			return nil, FlatBlockIDs, -1, BadRequest(param, "%s contains a negative block id %d", param, id)
		}
	}
	return ids, form, end, nil
}

// Validate checks params for use: do_remote_decode and do_remote_prefill
// are not both set (kvlease has no bidirectional mode), a lease_token, when
// present, is 32 hex digits, and when do_remote_prefill is set (a decode
// engine is to pull the prompt's KV) remote_engine_id, remote_request_id,
// remote_host, remote_port (1..65535), a non-empty remote_block_ids and
// lease_token are present. A nil receiver is valid (no P/D transfer).
func (p *KVTransferParams) Validate() *Error {
	if p == nil {
		return nil
	}
	if p.DoRemoteDecode && p.DoRemotePrefill {
		return BadRequest(kvParam+".do_remote_prefill",
			"kv_transfer_params: do_remote_decode and do_remote_prefill cannot both be true")
	}
	if p.LeaseToken != "" && !isLeaseToken(p.LeaseToken) {
		return BadRequest(kvParam+".lease_token", "kv_transfer_params.lease_token must be %d hex digits", LeaseTokenHexLen)
	}
	if !p.DoRemotePrefill {
		return nil
	}
	missing := func(field string) *Error {
		return BadRequest(kvParam+"."+field,
			"kv_transfer_params.%s is required when do_remote_prefill is true", field)
	}
	switch {
	case p.RemoteEngineID == "":
		return missing("remote_engine_id")
	case p.RemoteRequestID == "":
		return missing("remote_request_id")
	case p.RemoteHost == "":
		return missing("remote_host")
	case !isHost(p.RemoteHost):
		return BadRequest(kvParam+".remote_host",
			"kv_transfer_params.remote_host must be a host name or IP address, got %q", p.RemoteHost)
	case p.RemotePort == 0:
		return missing("remote_port")
	case p.RemotePort < 0 || p.RemotePort > 65535:
		return BadRequest(kvParam+".remote_port", "kv_transfer_params.remote_port must be between 1 and 65535, got %d", p.RemotePort)
	case len(p.RemoteBlockIDs) == 0:
		return BadRequest(kvParam+".remote_block_ids",
			"kv_transfer_params.remote_block_ids must list at least one block when do_remote_prefill is true")
	case p.LeaseToken == "":
		return missing("lease_token")
	case p.TPSize < 0:
		return BadRequest(kvParam+".tp_size", "kv_transfer_params.tp_size must not be negative, got %d", p.TPSize)
	}
	return nil
}

func isLeaseToken(s string) bool {
	if len(s) != LeaseTokenHexLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if unhex(s[i]) < 0 {
			return false
		}
	}
	return true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// isHost accepts printable ASCII without spaces and '/': host names, IPv4
// and IPv6 literals (with or without brackets). Resolution is the edge's job.
func isHost(s string) bool {
	if len(s) > MaxKVIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' {
			return false
		}
	}
	return true
}

// LeaseTokenBytes decodes LeaseToken. ok is false when it is not 32 hex
// digits.
func (p *KVTransferParams) LeaseTokenBytes() (tok [16]byte, ok bool) {
	if !isLeaseToken(p.LeaseToken) {
		return tok, false
	}
	for i := range tok {
		tok[i] = byte(unhex(p.LeaseToken[2*i])<<4 | unhex(p.LeaseToken[2*i+1]))
	}
	return tok, true
}

// FormatLeaseToken returns tok as the 32 lowercase hex digits of lease_token.
func FormatLeaseToken(tok [16]byte) string {
	var b [LeaseTokenHexLen]byte
	for i, c := range tok {
		b[2*i], b[2*i+1] = hexDigits[c>>4], hexDigits[c&0xF]
	}
	return string(b[:])
}

// AppendJSON appends p as a JSON object with vLLM's field names.
// do_remote_decode, do_remote_prefill, remote_engine_id, remote_block_ids,
// remote_host and remote_port are always written (null when absent, as
// vLLM's proxies write them); remote_request_id, tp_size, remote_num_tokens,
// lease_token and lease_expires_in_ms only when set; then the extras in
// order. An extra whose key is a known field is skipped (the field wins).
func (p *KVTransferParams) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"do_remote_decode":`...)
	dst = appendBool(dst, p.DoRemoteDecode)
	dst = append(dst, `,"do_remote_prefill":`...)
	dst = appendBool(dst, p.DoRemotePrefill)
	dst = append(dst, `,"remote_engine_id":`...)
	dst = appendStringOrNull(dst, p.RemoteEngineID)
	if p.RemoteRequestID != "" {
		dst = append(dst, `,"remote_request_id":`...)
		dst = appendString(dst, p.RemoteRequestID)
	}
	dst = append(dst, `,"remote_block_ids":`...)
	if p.RemoteBlockIDs == nil {
		dst = append(dst, "null"...)
	} else {
		if p.BlockIDsForm == GroupedBlockIDs {
			dst = append(dst, '[')
		}
		dst = append(dst, '[')
		for i, id := range p.RemoteBlockIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendInt(dst, int64(id))
		}
		dst = append(dst, ']')
		if p.BlockIDsForm == GroupedBlockIDs {
			dst = append(dst, ']')
		}
	}
	dst = append(dst, `,"remote_host":`...)
	dst = appendStringOrNull(dst, p.RemoteHost)
	dst = append(dst, `,"remote_port":`...)
	if p.RemotePort == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = appendInt(dst, int64(p.RemotePort))
	}
	if p.TPSize != 0 {
		dst = append(dst, `,"tp_size":`...)
		dst = appendInt(dst, int64(p.TPSize))
	}
	if p.RemoteNumTokens != 0 {
		dst = append(dst, `,"remote_num_tokens":`...)
		dst = appendInt(dst, int64(p.RemoteNumTokens))
	}
	if p.LeaseToken != "" {
		dst = append(dst, `,"lease_token":`...)
		dst = appendString(dst, p.LeaseToken)
	}
	if p.LeaseExpiresInMS != 0 {
		dst = append(dst, `,"lease_expires_in_ms":`...)
		dst = appendInt(dst, p.LeaseExpiresInMS)
	}
	for _, x := range p.Extra {
		if knownKVField(x.Key) {
			continue
		}
		dst = append(dst, ',')
		dst = appendString(dst, x.Key)
		dst = append(dst, ':')
		if len(x.Value) == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, x.Value...)
		}
	}
	return append(dst, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (p KVTransferParams) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler with ParseKVTransferParams; the
// error, if any, is an *Error.
func (p *KVTransferParams) UnmarshalJSON(data []byte) error {
	q, e := ParseKVTransferParams(data)
	if e != nil {
		return e
	}
	if q == nil {
		q = &KVTransferParams{}
	}
	*p = *q
	return nil
}
