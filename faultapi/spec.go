package faultapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// Kind is what a fault does. Its String is the "kind" of a spec and the
// label of kvlease_faults_injected_total.
type Kind uint8

const (
	// ExpireLease (P): the lease expires AfterMs after its grant, whatever
	// the renewals, through the producer's expiry (reason expired; a read
	// in flight delays it until the read ends).
	ExpireLease Kind = iota + 1
	// RevokeLease (P): the lease is revoked AfterMs after its grant, as an
	// abort after the finish revokes it (reason aborted, REVOKED to a bound
	// decode engine; a read in flight delays it).
	RevokeLease
	// RefuseRead (P): every READ of the lease is answered with an internal
	// error; the decode engine retries, then falls back (reason fallback).
	RefuseRead
	// StallBlocks (P): each read of the lease waits DelayMs before its
	// blocks are streamed, the lease pinned meanwhile.
	StallBlocks
	// CorruptBlocks (P): the blocks of the lease's first Reads reads carry a
	// checksum that does not match their content, as a bit flip in transit
	// would; the decode engine discards them and reads again.
	CorruptBlocks
	// DelayPrefill (P): the prefill answer (carrying the lease) is held
	// DelayMs after the lease is granted; the lease's clock runs.
	DelayPrefill
	// DropResponse (P): the connection is closed instead of writing the
	// prefill answer after the lease was granted: the lease is released
	// at once (reason undelivered).
	DropResponse
	// StopHeartbeats (D): the decode engine neither claims nor renews the
	// request's lease while it waits.
	StopHeartbeats
	// RejectDecode (D): the decode engine refuses the request carrying a
	// lease with Status and tells P (reason rejected).
	RejectDecode
	// StallPull (D): the decode engine waits DelayMs before it starts
	// pulling (heartbeats go on unless StopHeartbeats hits too).
	StallPull
	// Fallback (D): the decode engine gives the remote prefix up without
	// reading it and recomputes (or fails, under --fallback fail); P is
	// told (reason fallback).
	Fallback
	// HTTPError (any): the request is answered at once with Status.
	HTTPError
	// Latency (any): the request waits DelayMs before it is served.
	Latency
	numKinds
)

// Stage says which requests a kind applies to.
type Stage uint8

const (
	// AnyRequest: every generation request.
	AnyRequest Stage = iota
	// PrefillLeg: a prefill leg on an engine that grants leases (a request
	// with kv_transfer_params.do_remote_decode).
	PrefillLeg
	// DecodeLeg: a decode leg on an engine that pulls (a request with
	// kv_transfer_params.do_remote_prefill).
	DecodeLeg
)

func (s Stage) String() string {
	switch s {
	case PrefillLeg:
		return "prefill"
	case DecodeLeg:
		return "decode"
	}
	return "any"
}

// The parameters a kind takes, as bits.
const (
	paramAfter uint8 = 1 << iota
	paramDelay
	paramStatus
	paramReads
)

var kinds = [numKinds]struct {
	name     string
	stage    Stage
	params   uint8 // allowed
	required uint8
}{
	ExpireLease:    {"expire_lease", PrefillLeg, paramAfter, 0},
	RevokeLease:    {"revoke_lease", PrefillLeg, paramAfter, 0},
	RefuseRead:     {"refuse_read", PrefillLeg, 0, 0},
	StallBlocks:    {"stall_blocks", PrefillLeg, paramDelay, paramDelay},
	CorruptBlocks:  {"corrupt_blocks", PrefillLeg, paramReads, 0},
	DelayPrefill:   {"delay_prefill", PrefillLeg, paramDelay, paramDelay},
	DropResponse:   {"drop_response", PrefillLeg, 0, 0},
	StopHeartbeats: {"stop_heartbeats", DecodeLeg, 0, 0},
	RejectDecode:   {"reject_decode", DecodeLeg, paramStatus, 0},
	StallPull:      {"stall_pull", DecodeLeg, paramDelay, paramDelay},
	Fallback:       {"fallback", DecodeLeg, 0, 0},
	HTTPError:      {"http_error", AnyRequest, paramStatus, 0},
	Latency:        {"latency", AnyRequest, paramDelay, paramDelay},
}

// Valid reports whether k is a defined kind.
func (k Kind) Valid() bool { return k >= ExpireLease && k < numKinds }

func (k Kind) String() string {
	if k.Valid() {
		return kinds[k].name
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Stage is the requests k applies to.
func (k Kind) Stage() Stage { return kinds[k].stage }

// Kinds returns every kind in order; the caller owns the slice.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := ExpireLease; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, bool) {
	for k := ExpireLease; k < numKinds; k++ {
		if kinds[k].name == s {
			return k, true
		}
	}
	return 0, false
}

// Bounds of a spec.
const (
	MaxAfter      = time.Hour
	MaxDelay      = 10 * time.Minute
	MaxReads      = 1000
	MaxPatternLen = 256
	MaxDuration   = 24 * time.Hour
	MaxCount      = 1 << 30
	// MaxSpecBytes bounds a spec's JSON.
	MaxSpecBytes = 4096
	// DefaultHTTPStatus and DefaultRejectStatus are Status's defaults for
	// HTTPError and RejectDecode.
	DefaultHTTPStatus   = 500
	DefaultRejectStatus = 503
)

// Spec is one fault as a client posts it: a kind, its parameters and a
// scope. The zero value of a parameter the kind takes is its default.
type Spec struct {
	Kind Kind
	// After: ExpireLease, RevokeLease (after the grant; 0 at once).
	After time.Duration
	// Delay: StallBlocks, DelayPrefill, StallPull, Latency (> 0).
	Delay time.Duration
	// Status: HTTPError (default 500), RejectDecode (default 503); 400..599.
	Status int
	// Reads: CorruptBlocks, how many reads of a lease are corrupted
	// (default 1).
	Reads int
	Scope Scope
}

// Scope says which requests a fault hits and for how long it lasts.
type Scope struct {
	// Rate is the share of the requests that match which the fault hits,
	// 0..1 (default 1).
	Rate float64
	// RequestID is a pattern of X-Request-Id (path.Match syntax: *, ?,
	// [...]); empty matches every request.
	RequestID string
	// Duration: the fault is removed this long after it was added (0:
	// until deleted).
	Duration time.Duration
	// Count: the fault is removed once it hit this many requests (0: no
	// limit).
	Count int
}

// Error is a spec's validation failure: Field names the offending field
// (as in the JSON, dotted for the scope's), Msg says why.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "fault spec: " + e.Msg
	}
	return "fault spec: " + e.Field + ": " + e.Msg
}

func errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// specJSON is the wire form of a Spec. Pointers tell a field given from a
// field left out.
type specJSON struct {
	Kind    *string    `json:"kind"`
	AfterMs *int64     `json:"after_ms"`
	DelayMs *int64     `json:"delay_ms"`
	Status  *int       `json:"status"`
	Reads   *int       `json:"reads"`
	Scope   *scopeJSON `json:"scope"`
}

type scopeJSON struct {
	Rate       *float64 `json:"rate"`
	RequestID  *string  `json:"request_id"`
	DurationMs *int64   `json:"duration_ms"`
	Count      *int     `json:"count"`
}

// ParseSpec parses and validates a spec's JSON strictly: an unknown field,
// a field the kind does not take, a value out of bounds or trailing data is
// an *Error naming the field.
func ParseSpec(b []byte) (Spec, error) {
	if len(b) > MaxSpecBytes {
		return Spec{}, errorf("", "the spec is %d bytes; at most %d are accepted", len(b), MaxSpecBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j specJSON
	if err := dec.Decode(&j); err != nil {
		return Spec{}, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, errorf("", "trailing data after the spec's JSON object")
	}
	return j.validate()
}

// decodeError turns encoding/json's error into an *Error naming the field.
func decodeError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return errorf(te.Field, "must be a JSON %s, not %s", jsonType(te.Type.Kind().String()), te.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ := strconv.Unquote(f)
		if name == "" {
			name = f
		}
		return errorf(name, "unknown field")
	}
	return errorf("", "not a JSON object: %v", err)
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int", "int64":
		return "integer"
	case "float64":
		return "number"
	case "struct", "ptr":
		return "object"
	}
	return goKind
}

func (j *specJSON) validate() (Spec, error) {
	if j.Kind == nil {
		return Spec{}, errorf("kind", "is required: one of %s", kindNames())
	}
	k, ok := ParseKind(*j.Kind)
	if !ok {
		return Spec{}, errorf("kind", "unknown kind %q: one of %s", *j.Kind, kindNames())
	}
	s := Spec{Kind: k}
	info := kinds[k]
	given := uint8(0)
	check := func(field string, bit uint8, present bool) *Error {
		if !present {
			if info.required&bit != 0 {
				return errorf(field, "is required by kind %s", k)
			}
			return nil
		}
		given |= bit
		if info.params&bit == 0 {
			return errorf(field, "does not apply to kind %s", k)
		}
		return nil
	}
	if e := check("after_ms", paramAfter, j.AfterMs != nil); e != nil {
		return Spec{}, e
	}
	if e := check("delay_ms", paramDelay, j.DelayMs != nil); e != nil {
		return Spec{}, e
	}
	if e := check("status", paramStatus, j.Status != nil); e != nil {
		return Spec{}, e
	}
	if e := check("reads", paramReads, j.Reads != nil); e != nil {
		return Spec{}, e
	}
	if j.AfterMs != nil {
		if *j.AfterMs < 0 || time.Duration(*j.AfterMs)*time.Millisecond > MaxAfter {
			return Spec{}, errorf("after_ms", "must be 0..%d", MaxAfter.Milliseconds())
		}
		s.After = time.Duration(*j.AfterMs) * time.Millisecond
	}
	if j.DelayMs != nil {
		if *j.DelayMs <= 0 || time.Duration(*j.DelayMs)*time.Millisecond > MaxDelay {
			return Spec{}, errorf("delay_ms", "must be 1..%d", MaxDelay.Milliseconds())
		}
		s.Delay = time.Duration(*j.DelayMs) * time.Millisecond
	}
	switch {
	case j.Status != nil:
		if *j.Status < 400 || *j.Status > 599 {
			return Spec{}, errorf("status", "must be an HTTP error status, 400..599")
		}
		s.Status = *j.Status
	case k == HTTPError:
		s.Status = DefaultHTTPStatus
	case k == RejectDecode:
		s.Status = DefaultRejectStatus
	}
	switch {
	case j.Reads != nil:
		if *j.Reads < 1 || *j.Reads > MaxReads {
			return Spec{}, errorf("reads", "must be 1..%d", MaxReads)
		}
		s.Reads = *j.Reads
	case k == CorruptBlocks:
		s.Reads = 1
	}
	s.Scope.Rate = 1
	if sc := j.Scope; sc != nil {
		if sc.Rate != nil {
			if !(*sc.Rate >= 0 && *sc.Rate <= 1) {
				return Spec{}, errorf("scope.rate", "must be 0..1")
			}
			s.Scope.Rate = *sc.Rate
		}
		if sc.RequestID != nil {
			p := *sc.RequestID
			if len(p) > MaxPatternLen {
				return Spec{}, errorf("scope.request_id", "is longer than %d bytes", MaxPatternLen)
			}
			if _, err := path.Match(p, ""); err != nil {
				return Spec{}, errorf("scope.request_id", "is not a valid pattern (*, ?, [...], \\ escapes): %v", err)
			}
			s.Scope.RequestID = p
		}
		if sc.DurationMs != nil {
			if *sc.DurationMs <= 0 || time.Duration(*sc.DurationMs)*time.Millisecond > MaxDuration {
				return Spec{}, errorf("scope.duration_ms", "must be 1..%d", MaxDuration.Milliseconds())
			}
			s.Scope.Duration = time.Duration(*sc.DurationMs) * time.Millisecond
		}
		if sc.Count != nil {
			if *sc.Count < 1 || *sc.Count > MaxCount {
				return Spec{}, errorf("scope.count", "must be 1..%d", MaxCount)
			}
			s.Scope.Count = *sc.Count
		}
	}
	return s, nil
}

func kindNames() string {
	names := make([]string, 0, numKinds-1)
	for _, k := range Kinds() {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}

// AppendJSON appends s as JSON in the form ParseSpec reads, every default
// made explicit.
func (s *Spec) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"kind":`...)
	dst = appendString(dst, s.Kind.String())
	p := kinds[s.Kind].params
	if p&paramAfter != 0 {
		dst = append(dst, `,"after_ms":`...)
		dst = strconv.AppendInt(dst, s.After.Milliseconds(), 10)
	}
	if p&paramDelay != 0 {
		dst = append(dst, `,"delay_ms":`...)
		dst = strconv.AppendInt(dst, s.Delay.Milliseconds(), 10)
	}
	if p&paramStatus != 0 {
		dst = append(dst, `,"status":`...)
		dst = strconv.AppendInt(dst, int64(s.Status), 10)
	}
	if p&paramReads != 0 {
		dst = append(dst, `,"reads":`...)
		dst = strconv.AppendInt(dst, int64(s.Reads), 10)
	}
	dst = append(dst, `,"scope":{"rate":`...)
	dst = strconv.AppendFloat(dst, s.Scope.Rate, 'g', -1, 64)
	if s.Scope.RequestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = appendString(dst, s.Scope.RequestID)
	}
	if s.Scope.Duration > 0 {
		dst = append(dst, `,"duration_ms":`...)
		dst = strconv.AppendInt(dst, s.Scope.Duration.Milliseconds(), 10)
	}
	if s.Scope.Count > 0 {
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendInt(dst, int64(s.Scope.Count), 10)
	}
	return append(dst, "}}"...)
}

// appendString appends v as a JSON string.
func appendString(dst []byte, v string) []byte {
	b, _ := json.Marshal(v) // a string always encodes
	return append(dst, b...)
}
