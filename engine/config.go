package engine

import (
	"errors"
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model/constrain"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// Role is what an engine does in P/D serving.
type Role uint8

const (
	// RoleBoth serves whole requests, and can also act as P and D.
	RoleBoth Role = iota
	// RolePrefill computes prompts and leases their blocks to decoders.
	RolePrefill
	// RoleDecode pulls remote prefixes and generates.
	RoleDecode
)

// ParseRole parses a --role value.
func ParseRole(s string) (Role, error) {
	switch s {
	case "both":
		return RoleBoth, nil
	case "prefill":
		return RolePrefill, nil
	case "decode":
		return RoleDecode, nil
	}
	return 0, fmt.Errorf("engine: unknown role %q (want prefill, decode or both)", s)
}

func (r Role) String() string {
	switch r {
	case RolePrefill:
		return "prefill"
	case RoleDecode:
		return "decode"
	}
	return "both"
}

// Config configures a Core.
type Config struct {
	Pool  kvblock.Config
	Sched sched.Config
	// MaxModelLen bounds prompt + generated tokens.
	MaxModelLen int
	// VocabSize bounds token ids; EOS is the end-of-sequence token.
	VocabSize int
	EOS       int32
	// Vocab is the vocabulary constrained decoding masks (the token texts
	// of the model's tokenizer); nil means kvlease's byte tokenizer
	// (constrain.ByteVocab(VocabSize, EOS)), built on the first
	// constrained request.
	Vocab *constrain.Vocab
	// RecentFinished is how many finished request ids the core remembers
	// so that a late abort is reported as "already finished".
	RecentFinished int

	Role Role
	// EngineID names the engine to its P/D peers (remote_engine_id).
	EngineID string
	// Transfer enables the P/D transfer: a producer unless the role is
	// decode, a consumer unless it is prefill. Nil: single-engine only.
	Transfer *xfer.Config
	// Secret is the cluster secret for the peers' handshake.
	Secret []byte
	// HashKey keys the prefix hash of every request (kvblock.HashKey):
	// without it anyone who can send prompts could build two that collide
	// and be served the other's KV. Zero: derived from Secret when one is
	// set (kvblock.DeriveHashKey), so every engine of a cluster agrees;
	// with neither, the public zero key, which only tests and simulations
	// may use. `kvlease serve` without a secret draws a random key.
	HashKey kvblock.HashKey
	// Offload enables the offload tiers (--offload, --offload-policy):
	// blocks are copied to host memory or disk by the policy, and a prefix
	// missing from the pool but present in a tier is loaded back instead
	// of recomputed. Nil: no offload (nothing changes).
	Offload *offload.Config
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if err := c.Pool.Validate(); err != nil {
		return err
	}
	if err := c.Sched.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxModelLen < 2:
		return fmt.Errorf("engine: MaxModelLen must be at least 2, got %d", c.MaxModelLen)
	case c.VocabSize <= 0:
		return fmt.Errorf("engine: VocabSize must be positive, got %d", c.VocabSize)
	case c.EOS < 0 || int(c.EOS) >= c.VocabSize:
		return fmt.Errorf("engine: EOS %d is outside the vocabulary [0, %d)", c.EOS, c.VocabSize)
	case c.Vocab != nil && c.Vocab.Size() != c.VocabSize:
		return fmt.Errorf("engine: Vocab has %d tokens, VocabSize is %d", c.Vocab.Size(), c.VocabSize)
	case c.RecentFinished < 0:
		return errors.New("engine: RecentFinished must not be negative")
	case c.Role > RoleDecode:
		return fmt.Errorf("engine: unknown role %d", c.Role)
	case c.Role != RoleBoth && c.Transfer == nil:
		return fmt.Errorf("engine: role %s needs a transfer configuration", c.Role)
	case c.Transfer != nil && len(c.Secret) == 0:
		return errors.New("engine: P/D transfer needs a cluster secret")
	case c.Transfer != nil && (c.EngineID == "" || len(c.EngineID) > wire.MaxEngineIDBytes):
		return fmt.Errorf("engine: engine id must be 1 to %d bytes", wire.MaxEngineIDBytes)
	}
	if c.Transfer != nil {
		if err := c.Transfer.Validate(); err != nil {
			return err
		}
	}
	if c.Offload != nil {
		return c.Offload.ValidateFor(c.Pool)
	}
	return nil
}
