package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Roles of ComputeMAC: whose proof a MAC is. P proves itself over D's nonce
// (HelloAck.MAC), D over P's nonce (Auth.MAC). The role is part of the MAC
// input, so a proof of one side can never be replayed as the other's, even
// if a peer echoes the nonce it received.
const (
	RoleP byte = 'P'
	RoleD byte = 'D'
)

// macLabel separates kvlease handshake MACs from any other use of the
// cluster secret.
const macLabel = "kvlease/wire/v1 session proof\x00"

// ComputeMAC returns HMAC-SHA256 under the cluster secret over the label,
// role, the challenger's nonce and both engine ids (P's first, each prefixed
// by its length, so no two id pairs share an input). It panics if role is not
// RoleP or RoleD. An empty secret gives no authentication at all; refusing
// one is the configuration's job.
func ComputeMAC(secret []byte, role byte, nonce [16]byte, pEngineID, dEngineID string) [32]byte {
	if role != RoleP && role != RoleD {
		panic(fmt.Sprintf("wire: ComputeMAC role %q, want RoleP or RoleD", role))
	}
	h := hmac.New(sha256.New, secret)
	var b []byte
	b = append(b, macLabel...)
	b = append(b, role)
	b = append(b, nonce[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(pEngineID)))
	b = append(b, pEngineID...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(dEngineID)))
	b = append(b, dEngineID...)
	h.Write(b)
	var mac [32]byte
	h.Sum(mac[:0])
	return mac
}

// VerifyMAC reports whether mac is ComputeMAC of the same inputs, comparing
// in constant time (hmac.Equal).
func VerifyMAC(secret []byte, role byte, nonce [16]byte, pEngineID, dEngineID string, mac [32]byte) bool {
	want := ComputeMAC(secret, role, nonce, pEngineID, dEngineID)
	return hmac.Equal(want[:], mac[:])
}
