package openai

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// APIKeys is the set of API keys a server accepts, as vLLM's --api-key:
// a request presents one as "Authorization: Bearer <key>" (the scheme in
// any case). The zero APIKeys accepts every request (no key configured).
// Safe for concurrent use once made.
//
// Keys are kept as SHA-256 digests and a presented key is hashed and
// compared with every configured digest in constant time, as vLLM does, so
// neither the comparison's duration nor which key matched tells an attacker
// anything about a key.
type APIKeys struct {
	digests [][sha256.Size]byte
}

// NewAPIKeys returns the set of keys; empty strings are left out.
func NewAPIKeys(keys ...string) APIKeys {
	var k APIKeys
	for _, key := range keys {
		if key != "" {
			k.digests = append(k.digests, sha256.Sum256([]byte(key)))
		}
	}
	return k
}

// Enabled reports whether any key is configured.
func (k APIKeys) Enabled() bool { return len(k.digests) > 0 }

// Allow reports whether the Authorization header value authorization
// carries one of the keys; true when no key is configured.
func (k APIKeys) Allow(authorization string) bool {
	if len(k.digests) == 0 {
		return true
	}
	scheme, param, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "bearer") {
		return false
	}
	d := sha256.Sum256([]byte(param))
	match := 0
	for i := range k.digests {
		match |= subtle.ConstantTimeCompare(d[:], k.digests[i][:])
	}
	return match == 1
}

// CodeInvalidAPIKey is OpenAI's error code for a missing or wrong key.
const CodeInvalidAPIKey = "invalid_api_key"

// Unauthorized returns the 401 for a request without a valid API key, in
// OpenAI's shape (type invalid_request_error, code invalid_api_key). The
// message never echoes what was presented.
func Unauthorized() *Error {
	return &Error{Status: 401, Type: TypeInvalidRequest, Code: CodeInvalidAPIKey,
		Message: "Missing or invalid API key: send it as an \"Authorization: Bearer <key>\" header."}
}
