package cli

import (
	"errors"
	"os"
	"strings"
)

// API-key environment variables, read when --api-key is not given: ours
// first, then vLLM's, so a deployment that sets VLLM_API_KEY for vLLM
// engines protects kvlease engines the same way.
const (
	APIKeyEnv     = "KVLEASE_API_KEY"
	VLLMAPIKeyEnv = "VLLM_API_KEY"
)

// keyList is a repeatable flag of secret values (--api-key). Its String
// never prints them: -h shows the flag's default, and a key is no default.
type keyList []string

func (l *keyList) String() string { return "" }

func (l *keyList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("an empty API key would accept nothing useful; leave the flag out to serve without one")
	}
	*l = append(*l, v)
	return nil
}

// apiKeys returns the keys an HTTP server requires: every --api-key given,
// or else KVLEASE_API_KEY, or else VLLM_API_KEY; none when all are empty.
func apiKeys(flagKeys keyList) []string {
	if len(flagKeys) > 0 {
		return flagKeys
	}
	for _, env := range []string{APIKeyEnv, VLLMAPIKeyEnv} {
		if v := os.Getenv(env); v != "" {
			return []string{v}
		}
	}
	return nil
}

// clientAPIKey is the key a client command (bench) sends when --api-key is
// not given: KVLEASE_API_KEY, else VLLM_API_KEY, else OPENAI_API_KEY (what
// OpenAI's clients read); "" when none is set.
func ClientAPIKey() string {
	for _, env := range []string{APIKeyEnv, VLLMAPIKeyEnv, "OPENAI_API_KEY"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	return ""
}
