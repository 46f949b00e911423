package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

const testToken = "00112233445566778899aabbccddeeff"

// pResponse is what a prefill engine answers, with vLLM fields kvlease does
// not model (dcp_size, transfer_mode) and a proxy's own field.
const pResponse = `{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[[3,4,5]],
	"remote_engine_id":"p-0","remote_request_id":"cmpl-7","remote_host":"10.1.2.3","remote_port":9000,
	"tp_size":1,"dcp_size":1,"transfer_mode":"pull","remote_num_tokens":40,
	"lease_token":"` + testToken + `","lease_expires_in_ms":30000,"x_proxy":{"hop":[1, 2],"s":"a\nb"}}`

func TestKVParamsGroupedForm(t *testing.T) {
	p, e := ParseKVTransferParams(json.RawMessage(pResponse))
	if e != nil {
		t.Fatal(e)
	}
	want := &KVTransferParams{
		DoRemotePrefill: true, RemoteEngineID: "p-0", RemoteRequestID: "cmpl-7", RemoteHost: "10.1.2.3",
		RemotePort: 9000, RemoteBlockIDs: []int32{3, 4, 5}, BlockIDsForm: GroupedBlockIDs, TPSize: 1,
		RemoteNumTokens: 40, LeaseToken: testToken, LeaseExpiresInMS: 30000,
		Extra: []KVExtraField{
			{Key: "dcp_size", Value: json.RawMessage(`1`)},
			{Key: "transfer_mode", Value: json.RawMessage(`"pull"`)},
			{Key: "x_proxy", Value: json.RawMessage(`{"hop":[1,2],"s":"a\nb"}`)},
		},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
	if e := p.Validate(); e != nil {
		t.Fatal(e)
	}
	out := string(p.AppendJSON(nil))
	wantOut := `{"do_remote_decode":false,"do_remote_prefill":true,"remote_engine_id":"p-0","remote_request_id":"cmpl-7",` +
		`"remote_block_ids":[[3,4,5]],"remote_host":"10.1.2.3","remote_port":9000,"tp_size":1,"remote_num_tokens":40,` +
		`"lease_token":"` + testToken + `","lease_expires_in_ms":30000,"dcp_size":1,"transfer_mode":"pull","x_proxy":{"hop":[1,2],"s":"a\nb"}}`
	if out != wantOut {
		t.Fatalf("AppendJSON:\n%s\nwant\n%s", out, wantOut)
	}
	// Semantically the output equals the input: nothing lost, nothing added
	// (all of vLLM's always-written fields were present).
	var in, back map[string]any
	mustUnmarshal(t, pResponse, &in)
	mustUnmarshal(t, out, &back)
	if !reflect.DeepEqual(in, back) {
		t.Fatalf("pass-through changed the object:\n%v\n%v", in, back)
	}
}

func TestKVParamsFlatForm(t *testing.T) {
	p, e := ParseKVTransferParams(json.RawMessage(`{"do_remote_prefill":true,"remote_block_ids":[7, 8]}`))
	if e != nil {
		t.Fatal(e)
	}
	if p.BlockIDsForm != FlatBlockIDs || !reflect.DeepEqual(p.RemoteBlockIDs, []int32{7, 8}) {
		t.Fatalf("got %+v", p)
	}
	if out := string(p.AppendJSON(nil)); !strings.Contains(out, `"remote_block_ids":[7,8]`) {
		t.Fatalf("flat form not kept: %s", out)
	}
	// Empty lists stay present and keep their form.
	for in, want := range map[string]string{`[]`: `[]`, `[[]]`: `[[]]`, `null`: `null`} {
		p, e := ParseKVTransferParams(json.RawMessage(`{"remote_block_ids":` + in + `}`))
		if e != nil {
			t.Fatal(e)
		}
		if out := string(p.AppendJSON(nil)); !strings.Contains(out, `"remote_block_ids":`+want+`,`) {
			t.Errorf("%s: %s", in, out)
		}
	}
}

// TestKVParamsRouterToPrefill is the exact request leg vLLM's toy proxy and
// llm-d's sidecar send to a prefill engine.
func TestKVParamsRouterToPrefill(t *testing.T) {
	in := `{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`
	p, e := ParseKVTransferParams(json.RawMessage(in))
	if e != nil {
		t.Fatal(e)
	}
	if !reflect.DeepEqual(p, &KVTransferParams{DoRemoteDecode: true}) {
		t.Fatalf("got %+v", p)
	}
	if e := p.Validate(); e != nil {
		t.Fatal(e)
	}
	if out := string(p.AppendJSON(nil)); out != in {
		t.Fatalf("got %s\nwant %s", out, in)
	}
}

func TestKVParamsNull(t *testing.T) {
	for _, in := range []string{"", "null", "  null "} {
		p, e := ParseKVTransferParams(json.RawMessage(in))
		if p != nil || e != nil {
			t.Errorf("%q: %v %v", in, p, e)
		}
	}
	var p *KVTransferParams
	if p.Validate() != nil {
		t.Error("nil params invalid")
	}
}

func TestKVParamsExtras(t *testing.T) {
	// Duplicate keys: the last wins, for known fields and extras alike.
	p, e := ParseKVTransferParams(json.RawMessage(`{"a":1,"remote_port":1,"b":2,"a":3,"remote_port":2}`))
	if e != nil {
		t.Fatal(e)
	}
	if p.RemotePort != 2 || len(p.Extra) != 2 || string(p.Extra[0].Value) != "3" || p.Extra[1].Key != "b" {
		t.Fatalf("got %+v", p)
	}
	// Keys match exactly, as in Python: a differently cased known name is
	// an extra.
	p, _ = ParseKVTransferParams(json.RawMessage(`{"Remote_Port":5}`))
	if p.RemotePort != 0 || len(p.Extra) != 1 {
		t.Fatalf("case-insensitive match: %+v", p)
	}
	// An extra named like a known field (built in code) is not written twice.
	q := &KVTransferParams{RemotePort: 1, Extra: []KVExtraField{{Key: "remote_port", Value: json.RawMessage("2")}, {Key: "z"}}}
	out := string(q.AppendJSON(nil))
	if strings.Count(out, "remote_port") != 1 || !strings.HasSuffix(out, `"z":null}`) {
		t.Fatalf("got %s", out)
	}
	// The number of extras is bounded.
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i <= MaxKVExtraFields; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":0`)
	}
	b.WriteString("}")
	if _, e := ParseKVTransferParams(json.RawMessage(b.String())); e == nil || e.Param != kvParam {
		t.Fatalf("65 extras: %v", e)
	}
}

func TestKVParamsParseErrors(t *testing.T) {
	tests := []struct {
		in, param string
	}{
		{`[]`, "kv_transfer_params"},
		{`"x"`, "kv_transfer_params"},
		{`{`, "kv_transfer_params"},
		{`{"a":}`, "kv_transfer_params"},
		{`{} {}`, "kv_transfer_params"},
		{`{"do_remote_decode":"true"}`, "kv_transfer_params.do_remote_decode"},
		{`{"do_remote_prefill":1}`, "kv_transfer_params.do_remote_prefill"},
		{`{"remote_engine_id":5}`, "kv_transfer_params.remote_engine_id"},
		{`{"remote_host":["h"]}`, "kv_transfer_params.remote_host"},
		{`{"remote_host":"` + strings.Repeat("h", MaxKVIDBytes+1) + `"}`, "kv_transfer_params.remote_host"},
		{`{"remote_port":"9000"}`, "kv_transfer_params.remote_port"},
		{`{"remote_port":9000.0}`, "kv_transfer_params.remote_port"},
		{`{"remote_port":65536}`, "kv_transfer_params.remote_port"},
		{`{"remote_port":-1}`, "kv_transfer_params.remote_port"},
		{`{"tp_size":-1}`, "kv_transfer_params.tp_size"},
		{`{"remote_num_tokens":1e3}`, "kv_transfer_params.remote_num_tokens"},
		{`{"lease_expires_in_ms":true}`, "kv_transfer_params.lease_expires_in_ms"},
		{`{"lease_expires_in_ms":86400001}`, "kv_transfer_params.lease_expires_in_ms"},
		{`{"lease_expires_in_ms":9007199254740992}`, "kv_transfer_params.lease_expires_in_ms"},
		{`{"lease_expires_in_ms":9300000000000}`, "kv_transfer_params.lease_expires_in_ms"},
		{`{"lease_expires_in_ms":-1}`, "kv_transfer_params.lease_expires_in_ms"},
		{`{"lease_token":123}`, "kv_transfer_params.lease_token"},
		{`{"remote_block_ids":{}}`, "kv_transfer_params.remote_block_ids"},
		{`{"remote_block_ids":[1,"2"]}`, "kv_transfer_params.remote_block_ids"},
		{`{"remote_block_ids":[[1],[2]]}`, "kv_transfer_params.remote_block_ids"},
		{`{"remote_block_ids":[-1]}`, "kv_transfer_params.remote_block_ids"},
		{`{"remote_block_ids":[[1,[2]]]}`, "kv_transfer_params.remote_block_ids"},
		{`{"remote_block_ids":[4294967296]}`, "kv_transfer_params.remote_block_ids"},
	}
	for _, tc := range tests {
		p, e := ParseKVTransferParams(json.RawMessage(tc.in))
		if e == nil || p != nil {
			t.Errorf("%s: no error (%+v)", tc.in, p)
			continue
		}
		if e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: status %d param %q (%s), want 400 %q", tc.in, e.Status, e.Param, e.Message, tc.param)
		}
	}
}

func validDecodeParams() *KVTransferParams {
	return &KVTransferParams{DoRemotePrefill: true, RemoteEngineID: "p", RemoteRequestID: "r",
		RemoteHost: "::1", RemotePort: 1, RemoteBlockIDs: []int32{0}, LeaseToken: strings.ToUpper(testToken)}
}

func TestKVParamsValidate(t *testing.T) {
	if e := validDecodeParams().Validate(); e != nil {
		t.Fatalf("valid params: %v", e)
	}
	tests := []struct {
		name  string
		edit  func(p *KVTransferParams)
		param string
	}{
		{"both directions", func(p *KVTransferParams) { p.DoRemoteDecode = true }, "kv_transfer_params.do_remote_prefill"},
		{"no engine", func(p *KVTransferParams) { p.RemoteEngineID = "" }, "kv_transfer_params.remote_engine_id"},
		{"no request", func(p *KVTransferParams) { p.RemoteRequestID = "" }, "kv_transfer_params.remote_request_id"},
		{"no host", func(p *KVTransferParams) { p.RemoteHost = "" }, "kv_transfer_params.remote_host"},
		{"bad host", func(p *KVTransferParams) { p.RemoteHost = "a b" }, "kv_transfer_params.remote_host"},
		{"url host", func(p *KVTransferParams) { p.RemoteHost = "http://x/" }, "kv_transfer_params.remote_host"},
		{"no port", func(p *KVTransferParams) { p.RemotePort = 0 }, "kv_transfer_params.remote_port"},
		{"port high", func(p *KVTransferParams) { p.RemotePort = 65536 }, "kv_transfer_params.remote_port"},
		{"no blocks", func(p *KVTransferParams) { p.RemoteBlockIDs = nil }, "kv_transfer_params.remote_block_ids"},
		{"empty blocks", func(p *KVTransferParams) { p.RemoteBlockIDs = []int32{} }, "kv_transfer_params.remote_block_ids"},
		{"no token", func(p *KVTransferParams) { p.LeaseToken = "" }, "kv_transfer_params.lease_token"},
		{"short token", func(p *KVTransferParams) { p.LeaseToken = testToken[1:] }, "kv_transfer_params.lease_token"},
		{"non-hex token", func(p *KVTransferParams) { p.LeaseToken = "g" + testToken[1:] }, "kv_transfer_params.lease_token"},
		{"negative tp", func(p *KVTransferParams) { p.TPSize = -1 }, "kv_transfer_params.tp_size"},
	}
	for _, tc := range tests {
		p := validDecodeParams()
		tc.edit(p)
		e := p.Validate()
		if e == nil || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: got %v, want 400 %s", tc.name, e, tc.param)
		}
	}
	// A prefill-side request needs none of the decode fields, but a
	// malformed token is rejected wherever it appears.
	if e := (&KVTransferParams{DoRemoteDecode: true}).Validate(); e != nil {
		t.Errorf("prefill side: %v", e)
	}
	if e := (&KVTransferParams{LeaseToken: "xyz"}).Validate(); e == nil {
		t.Errorf("bad token accepted without do_remote_prefill")
	}
}

func TestLeaseTokenBytes(t *testing.T) {
	tok := [16]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	if s := FormatLeaseToken(tok); s != testToken {
		t.Fatalf("FormatLeaseToken = %s", s)
	}
	for _, s := range []string{testToken, strings.ToUpper(testToken)} {
		got, ok := (&KVTransferParams{LeaseToken: s}).LeaseTokenBytes()
		if !ok || got != tok {
			t.Fatalf("LeaseTokenBytes(%s) = %x %v", s, got, ok)
		}
	}
	if _, ok := (&KVTransferParams{LeaseToken: "zz"}).LeaseTokenBytes(); ok {
		t.Fatal("bad token decoded")
	}
}

func TestKVParamsEncodingJSON(t *testing.T) {
	// Through encoding/json in both directions, as a proxy would use them.
	type envelope struct {
		KV *KVTransferParams `json:"kv_transfer_params,omitempty"`
	}
	var env envelope
	mustUnmarshal(t, `{"kv_transfer_params":`+pResponse+`}`, &env)
	p, _ := ParseKVTransferParams(json.RawMessage(pResponse))
	if !reflect.DeepEqual(env.KV, p) {
		t.Fatalf("UnmarshalJSON: %+v", env.KV)
	}
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kv_transfer_params":` + string(p.AppendJSON(nil)) + `}`; string(out) != want {
		t.Fatalf("Marshal: %s\nwant %s", out, want)
	}
	// A value (not pointer) marshals the same way.
	out, _ = json.Marshal(*p)
	if !bytes.Equal(out, p.AppendJSON(nil)) {
		t.Fatalf("value Marshal: %s", out)
	}
	if err := json.Unmarshal([]byte(`{"kv_transfer_params":{"remote_port":"x"}}`), &env); err == nil {
		t.Fatal("bad params unmarshalled")
	}
}

func mustUnmarshal(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("unmarshal %s: %v", s, err)
	}
}

func FuzzKVTransferParams(f *testing.F) {
	f.Add([]byte(pResponse))
	f.Add([]byte(`{"do_remote_decode":true,"remote_block_ids":[1,2]}`))
	f.Add([]byte(`{"remote_block_ids":[[]],"a":{"b":[null,true]}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"lease_expires_in_ms":9300000000000}`))
	f.Add([]byte(`{"remote_host":"h","remote_host":"\u0068","remote_po\u0072t":7, "x" : [ 1 ] ,"x":2}`))
	f.Add([]byte(`{"remote_port":"7"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, e := ParseKVTransferParams(raw)
		// The scan of a valid object gives what encoding/json's decoder
		// gives, error included.
		if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '{' && Valid(trimmed) {
			dp, de := decodeKVTransferParams(trimmed)
			if !reflect.DeepEqual(p, dp) || !reflect.DeepEqual(e, de) {
				t.Fatalf("%q: scan gives %+v %+v, the decoder %+v %+v", raw, p, e, dp, de)
			}
		}
		if e != nil {
			if p != nil || e.Status != 400 || !strings.HasPrefix(e.Param, kvParam) {
				t.Fatalf("bad error %+v with params %+v", e, p)
			}
			return
		}
		if p == nil {
			return
		}
		// Every number that becomes a duration does so without overflow.
		if d := time.Duration(p.LeaseExpiresInMS) * time.Millisecond; d < 0 || d/time.Millisecond != time.Duration(p.LeaseExpiresInMS) {
			t.Fatalf("lease_expires_in_ms %d overflows a Duration", p.LeaseExpiresInMS)
		}
		_ = p.Validate()
		out := p.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("invalid JSON out: %s", out)
		}
		if bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("raw line break in output: %q", out)
		}
		q, e := ParseKVTransferParams(out)
		if e != nil {
			t.Fatalf("re-parse of %s: %v", out, e)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed params:\n%+v\n%+v", p, q)
		}
		if out2 := q.AppendJSON(nil); !bytes.Equal(out, out2) {
			t.Fatalf("output not stable:\n%s\n%s", out, out2)
		}
	})
}
