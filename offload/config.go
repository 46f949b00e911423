package offload

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvlease/kvlease/kvblock"
)

// PolicyKind names a store policy: which blocks are offered to the offload
// tiers, and when (--offload-policy).
type PolicyKind uint8

const (
	// StoreOnCompute offers every full block of a request as soon as it is
	// computed (and again, if it was refused, at every later step, at
	// preemption and at teardown).
	StoreOnCompute PolicyKind = iota + 1
	// PreemptionOnly offers a request's computed full blocks when it is
	// preempted, so that its recomputation can load them back.
	PreemptionOnly
	// Spillover offers cached blocks with no hold that are next in line to
	// be evicted from the primary pool.
	Spillover
	// StoreOnFinish offers a request's computed full blocks when it
	// finishes.
	StoreOnFinish
	// RequestLevel stores a request's computed full blocks as one unit
	// when it finishes, all or nothing, and loads only whole units.
	RequestLevel
)

// PolicyNames lists the --offload-policy values in PolicyKind order.
var PolicyNames = []string{"store-on-compute", "preemption-only", "spillover", "store-on-finish", "request-level"}

func (k PolicyKind) String() string {
	if k >= StoreOnCompute && k <= RequestLevel {
		return PolicyNames[k-1]
	}
	return fmt.Sprintf("PolicyKind(%d)", k)
}

// ParsePolicy parses an --offload-policy value.
func ParsePolicy(s string) (PolicyKind, error) {
	for i, n := range PolicyNames {
		if s == n {
			return PolicyKind(i + 1), nil
		}
	}
	return 0, fmt.Errorf("--offload-policy: unknown policy %q (want %s)", s, strings.Join(PolicyNames, ", "))
}

// TierConfig is one offload tier: where it lives and how big it is. Exactly
// one of Bytes and Blocks is set.
type TierConfig struct {
	// Medium is MediumCPU (host memory) or MediumDisk.
	Medium string
	// Path is the disk tier's directory (MediumDisk only).
	Path string
	// Bytes is the tier's size; its capacity in blocks is Bytes divided by
	// the bytes of one block (KV bytes plus 8 bytes of digest per token).
	Bytes int64
	// Blocks is the tier's capacity in blocks, when given that way.
	Blocks int
}

// BlockBytes is the tier memory one block of a pool with configuration pc
// takes: its KV bytes and one 8-byte digest per token slot.
func BlockBytes(pc kvblock.Config) int64 {
	return int64(pc.BlockSizeTokens) * (int64(pc.BytesPerToken) + 8)
}

// NumBlocks is the tier's capacity in blocks of a pool with configuration
// pc, or an error naming --offload if it holds no block or too many.
func (t TierConfig) NumBlocks(pc kvblock.Config) (int, error) {
	n := int64(t.Blocks)
	if t.Bytes > 0 {
		bb := BlockBytes(pc)
		if bb <= 0 {
			return 0, fmt.Errorf("--offload: %s tier: the pool's block size is not set", strings.ToLower(t.Medium))
		}
		n = t.Bytes / bb
		if n < 1 {
			return 0, fmt.Errorf("--offload: %s tier of %d bytes holds no block of %d bytes; give it at least %d bytes",
				strings.ToLower(t.Medium), t.Bytes, bb, bb)
		}
	}
	if n < 1 || n > maxNumBlocks {
		return 0, fmt.Errorf("--offload: %s tier of %d blocks: want 1 to %d blocks", strings.ToLower(t.Medium), n, maxNumBlocks)
	}
	return int(n), nil
}

func (t TierConfig) String() string {
	size := strconv.FormatInt(t.Bytes, 10)
	if t.Blocks > 0 {
		size = strconv.Itoa(t.Blocks) + "blocks"
	}
	if t.Medium == MediumDisk {
		return "disk:" + t.Path + ":" + size
	}
	return strings.ToLower(t.Medium) + ":" + size
}

const maxTierSpec = 4096 // bytes of an --offload value

// ParseTiers parses an --offload value: "cpu:SIZE", "disk:PATH:SIZE" or
// both, comma-separated, at most one tier per medium ("" means no
// offload). SIZE is a byte count with an optional unit — K, M, G, T (and
// KiB, MiB, GiB, TiB) are powers of 1024, KB, MB, GB, TB powers of 1000 —
// or a block count with the suffix "blocks" ("cpu:4096blocks"). The disk
// PATH ends at the last colon, so it may contain colons itself. Lookups and
// loads prefer tiers in the order given.
func ParseTiers(s string) ([]TierConfig, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > maxTierSpec {
		return nil, fmt.Errorf("--offload: value of %d bytes is too long", len(s))
	}
	var tiers []TierConfig
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		kind, rest, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("--offload: %q: want cpu:SIZE or disk:PATH:SIZE", part)
		}
		var t TierConfig
		switch strings.ToLower(kind) {
		case "cpu":
			t.Medium = MediumCPU
		case "disk":
			t.Medium = MediumDisk
			i := strings.LastIndexByte(rest, ':')
			if i < 0 {
				return nil, fmt.Errorf("--offload: %q: a disk tier needs a path and a size (disk:PATH:SIZE)", part)
			}
			t.Path, rest = rest[:i], rest[i+1:]
			if t.Path == "" {
				return nil, fmt.Errorf("--offload: %q: the disk tier's path is empty", part)
			}
		default:
			return nil, fmt.Errorf("--offload: %q: unknown tier %q (want cpu or disk)", part, kind)
		}
		var err error
		if n, isBlocks := strings.CutSuffix(rest, "blocks"); isBlocks {
			var b int64
			b, err = strconv.ParseInt(n, 10, 64)
			switch {
			case err != nil || b < 1:
				err = fmt.Errorf("--offload: %q: bad block count %q", part, n)
			case b > maxNumBlocks:
				err = fmt.Errorf("--offload: %q: %d blocks is over the limit of %d", part, b, maxNumBlocks)
			}
			t.Blocks = int(b)
		} else {
			t.Bytes, err = ParseSize(rest)
			if err != nil {
				err = fmt.Errorf("--offload: %q: %w", part, err)
			}
		}
		if err != nil {
			return nil, err
		}
		for _, u := range tiers {
			if u.Medium == t.Medium {
				return nil, fmt.Errorf("--offload: %q: a second %s tier (at most one per medium)", part, strings.ToLower(kind))
			}
		}
		tiers = append(tiers, t)
	}
	return tiers, nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first.
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

const maxSizeBytes = 1 << 50

// ParseSize parses a positive byte count with an optional unit (see
// ParseTiers), case-insensitively: "512MiB", "8G", "1000000".
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if len(s) > len(u.suffix) && strings.EqualFold(s[len(s)-len(u.suffix):], u.suffix) {
			num, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad size %q (want a positive number with an optional unit such as 512MiB or 8G)", s)
	}
	if n > maxSizeBytes/mult {
		return 0, fmt.Errorf("size %q is over 1 PiB", s)
	}
	return n * mult, nil
}

// Config configures a Coordinator. Zero bounds select defaults scaled to
// the pool (see DefaultConfig).
type Config struct {
	// Tiers are the offload tiers, in lookup preference order (ParseTiers).
	Tiers []TierConfig
	// Policy names the built-in policy that decides which blocks are
	// stored when; NewPolicy, when set, builds the policy instead (and
	// Policy is ignored). A Coordinator calls NewPolicy once: a Config
	// shared by several engines gives each its own policy.
	Policy    PolicyKind
	NewPolicy func(PolicyEnv) Policy
	// Eviction is the tiers' replacement policy: EvictionLRU or
	// EvictionARC.
	Eviction string
	// StoreThreshold enables the tiers' reuse filter when ≥ 2 (see
	// ManagerConfig).
	StoreThreshold int
	// MaxInflightStoreBlocks bounds the blocks under store holds (a block
	// stored to two tiers counts twice). At the bound nothing more is
	// offered; the watermarks stay, so the blocks are offered later. 0:
	// a quarter of the pool, or with RequestLevel the whole pool per tier
	// (a request's unit is stored whole or not at all, once, when it
	// finishes: under a quarter of the pool every request longer than that
	// would be refused entire).
	MaxInflightStoreBlocks int
	// MaxInflightLoadBlocks bounds the blocks under load holds (target
	// blocks only). At the bound a lookup loads a shorter prefix or none.
	// 0: a quarter of the pool.
	MaxInflightLoadBlocks int
	// SpillAheadBlocks is how many blocks at the head of the primary
	// pool's eviction order the spillover policy keeps stored; it spills
	// only while fewer than this many blocks are free. 0: a sixteenth of
	// the pool (at least 1).
	SpillAheadBlocks int
	// LoadHoldSteps bounds, in engine steps (Coordinator.Take calls),
	// how long a loaded prefix stays held waiting for its request's
	// admission; then it is dropped (its blocks stay cached, evictable).
	// 0: DefaultLoadHoldSteps; negative: loaded prefixes are not held.
	LoadHoldSteps int
	// MaxHeldLoadBlocks bounds the blocks of loaded prefixes held until
	// admission (their primary prefix and their loaded blocks); a load
	// ending at the bound is not held (the older holds belong to requests
	// nearer the head of the queue). It is a backstop: the
	// engine's valve (Coordinator.DropHeld) keeps holds from blocking the
	// queue's head. 0: half the pool.
	MaxHeldLoadBlocks int
	// MaxStoreRetries is how many times the blocks of a failed store are
	// retried, after 1, 2, 4, ... steps, before they are given up (then
	// the request they came from offers them again at its next trigger).
	// 0: DefaultStoreRetries; negative: none.
	MaxStoreRetries int
	// MaxRequests bounds the requests whose watermarks are tracked; a
	// request beyond it is not offered by the per-request policies. 0:
	// DefaultMaxRequests.
	MaxRequests int
	// LeaseSpill says when a prefill engine moves leased, unread blocks
	// to the tiers (--lease-spill; lease.go, engine/spill.go).
	LeaseSpill LeaseSpillPolicy
	// MaxLeaseSpillBlocks bounds the tier blocks pinned for leases plus
	// those of spill stores in flight, so leases never take a tier from
	// the other policies. 0: half the largest tier.
	MaxLeaseSpillBlocks int
}

// DefaultLoadHoldSteps is the default bound on how many steps a loaded
// prefix waits, held, for its request's admission.
const DefaultLoadHoldSteps = 256

// DefaultStoreRetries is the default number of retries of a failed store.
const DefaultStoreRetries = 3

// DefaultMaxRequests is the default bound on tracked requests.
const DefaultMaxRequests = 1 << 16

const maxRequestsLimit = 1 << 24

const maxStoreRetries = 16

// DefaultConfig stores on compute into the given tiers with LRU eviction
// and the reuse filter off.
func DefaultConfig(tiers []TierConfig) Config {
	return Config{Tiers: tiers, Policy: StoreOnCompute, Eviction: EvictionLRU}
}

// Validate reports the first problem with c that does not depend on the
// pool. Tier sizes are checked by ValidateFor.
func (c Config) Validate() error {
	if len(c.Tiers) == 0 {
		return errors.New("--offload: no tier given (want cpu:SIZE and/or disk:PATH:SIZE)")
	}
	if len(c.Tiers) > 2 {
		return fmt.Errorf("--offload: %d tiers; at most one cpu and one disk tier", len(c.Tiers))
	}
	for i, t := range c.Tiers {
		switch {
		case t.Medium != MediumCPU && t.Medium != MediumDisk:
			return fmt.Errorf("--offload: tier %d has medium %q (want %s or %s)", i, t.Medium, MediumCPU, MediumDisk)
		case t.Medium == MediumDisk && t.Path == "":
			return errors.New("--offload: the disk tier needs a path (disk:PATH:SIZE)")
		case t.Medium == MediumCPU && t.Path != "":
			return fmt.Errorf("--offload: the cpu tier takes no path (got %q)", t.Path)
		case (t.Bytes > 0) == (t.Blocks > 0) || t.Bytes < 0 || t.Blocks < 0:
			return fmt.Errorf("--offload: %s tier: give a positive size in bytes or in blocks, not both", strings.ToLower(t.Medium))
		}
		for _, u := range c.Tiers[:i] {
			if u.Medium == t.Medium {
				return fmt.Errorf("--offload: two %s tiers (at most one per medium)", strings.ToLower(t.Medium))
			}
		}
	}
	switch {
	case c.NewPolicy == nil && (c.Policy < StoreOnCompute || c.Policy > RequestLevel):
		return fmt.Errorf("--offload-policy: unknown policy %d (want %s)", c.Policy, strings.Join(PolicyNames, ", "))
	case c.NewPolicy == nil && c.Policy == RequestLevel && c.StoreThreshold >= 2:
		return fmt.Errorf("offload: policy %s stores whole requests and the reuse filter (StoreThreshold %d) would refuse every one (their new blocks were never looked up); use another policy or no threshold",
			RequestLevel, c.StoreThreshold)
	case c.Eviction != "" && c.Eviction != EvictionLRU && c.Eviction != EvictionARC:
		return fmt.Errorf("offload: Eviction must be %q or %q, got %q", EvictionLRU, EvictionARC, c.Eviction)
	case c.StoreThreshold < 0 || c.StoreThreshold > maxStoreThreshold:
		return fmt.Errorf("offload: StoreThreshold must be in [0, %d], got %d", maxStoreThreshold, c.StoreThreshold)
	case c.MaxInflightStoreBlocks < 0, c.MaxInflightLoadBlocks < 0, c.SpillAheadBlocks < 0, c.MaxHeldLoadBlocks < 0:
		return errors.New("offload: MaxInflightStoreBlocks, MaxInflightLoadBlocks, MaxHeldLoadBlocks and SpillAheadBlocks must not be negative")
	case c.MaxStoreRetries > maxStoreRetries:
		return fmt.Errorf("offload: MaxStoreRetries must be at most %d, got %d", maxStoreRetries, c.MaxStoreRetries)
	case c.MaxRequests < 0 || c.MaxRequests > maxRequestsLimit:
		return fmt.Errorf("offload: MaxRequests must be in [0, %d], got %d", maxRequestsLimit, c.MaxRequests)
	case int(c.LeaseSpill) >= len(LeaseSpillNames):
		return fmt.Errorf("--lease-spill: unknown policy %d (want %s)", c.LeaseSpill, strings.Join(LeaseSpillNames, ", "))
	case c.MaxLeaseSpillBlocks < 0:
		return errors.New("offload: MaxLeaseSpillBlocks must not be negative")
	}
	return nil
}

// ValidateFor is Validate plus the checks that depend on the pool: every
// tier holds at least one of its blocks and not too many.
func (c Config) ValidateFor(pc kvblock.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	for _, t := range c.Tiers {
		if _, err := t.NumBlocks(pc); err != nil {
			return err
		}
	}
	return nil
}

// resolved fills in the defaults that depend on the pool's capacity (and,
// for MaxLeaseSpillBlocks, tierBlocks, the largest tier's).
func (c Config) resolved(capacity, tierBlocks int) Config {
	if c.MaxLeaseSpillBlocks == 0 {
		c.MaxLeaseSpillBlocks = max(1, tierBlocks/2)
	}
	quarter := max(1, capacity/4)
	if c.MaxInflightStoreBlocks == 0 {
		c.MaxInflightStoreBlocks = quarter
		if c.NewPolicy == nil && c.Policy == RequestLevel {
			c.MaxInflightStoreBlocks = capacity * len(c.Tiers)
		}
	}
	if c.MaxInflightLoadBlocks == 0 {
		c.MaxInflightLoadBlocks = quarter
	}
	if c.SpillAheadBlocks == 0 {
		c.SpillAheadBlocks = max(1, capacity/16)
	}
	if c.MaxStoreRetries == 0 {
		c.MaxStoreRetries = DefaultStoreRetries
	}
	if c.LoadHoldSteps == 0 {
		c.LoadHoldSteps = DefaultLoadHoldSteps
	}
	if c.MaxHeldLoadBlocks == 0 {
		c.MaxHeldLoadBlocks = max(1, capacity/2)
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	if c.Eviction == "" {
		c.Eviction = EvictionLRU
	}
	return c
}
