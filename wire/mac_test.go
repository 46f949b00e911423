package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

func TestMAC(t *testing.T) {
	secret := []byte("cluster secret")
	n := nonce(7)
	good := ComputeMAC(secret, RoleP, n, "prefill-0", "decode-0")
	if !VerifyMAC(secret, RoleP, n, "prefill-0", "decode-0", good) {
		t.Fatal("a correct MAC does not verify")
	}
	if good != ComputeMAC(secret, RoleP, n, "prefill-0", "decode-0") {
		t.Fatal("ComputeMAC is not deterministic")
	}
	flipped := good
	flipped[31] ^= 1
	for _, tc := range []struct {
		name   string
		secret string
		role   byte
		nonce  [16]byte
		p, d   string
		mac    [32]byte
	}{
		{"wrong secret", "cluster secreT", RoleP, n, "prefill-0", "decode-0", good},
		{"empty secret", "", RoleP, n, "prefill-0", "decode-0", good},
		{"other role (reflection)", "cluster secret", RoleD, n, "prefill-0", "decode-0", good},
		{"other nonce", "cluster secret", RoleP, nonce(8), "prefill-0", "decode-0", good},
		{"other P", "cluster secret", RoleP, n, "prefill-1", "decode-0", good},
		{"other D", "cluster secret", RoleP, n, "prefill-0", "decode-1", good},
		{"ids swapped", "cluster secret", RoleP, n, "decode-0", "prefill-0", good},
		{"id boundary moved", "cluster secret", RoleP, n, "prefill-0d", "ecode-0", good},
		{"flipped bit", "cluster secret", RoleP, n, "prefill-0", "decode-0", flipped},
		{"zero MAC", "cluster secret", RoleP, n, "prefill-0", "decode-0", [32]byte{}},
	} {
		if VerifyMAC([]byte(tc.secret), tc.role, tc.nonce, tc.p, tc.d, tc.mac) {
			t.Errorf("%s: verifies", tc.name)
		}
	}
}

// TestMACLayout pins the MAC input, so both sides of a mixed-version
// cluster agree on it byte for byte.
func TestMACLayout(t *testing.T) {
	secret := []byte("s")
	n := nonce(1)
	var in []byte
	in = append(in, "kvlease/wire/v1 session proof\x00"...)
	in = append(in, 'D')
	in = append(in, n[:]...)
	in = binary.BigEndian.AppendUint32(in, 1)
	in = append(in, 'p')
	in = binary.BigEndian.AppendUint32(in, 2)
	in = append(in, "dd"...)
	h := hmac.New(sha256.New, secret)
	h.Write(in)
	if got := ComputeMAC(secret, RoleD, n, "p", "dd"); !hmac.Equal(got[:], h.Sum(nil)) {
		t.Fatalf("MAC input layout changed")
	}
}

func TestMACBadRolePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("role 'X' did not panic")
		}
	}()
	ComputeMAC(nil, 'X', [16]byte{}, "", "")
}
