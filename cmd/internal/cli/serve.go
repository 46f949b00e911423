package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/httpapi"
	"github.com/kvlease/kvlease/httpserver"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/kvevents"
	"github.com/kvlease/kvlease/metrics"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/constrain"
	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/model/llamafile"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

func init() {
	Register(Command{
		Name:    "serve",
		Summary: "an engine: OpenAI-compatible HTTP API, vLLM metrics, P/D prefill or decode role",
		Run:     runServe,
	})
}

// secretEnv is the environment variable that may hold the cluster secret
// instead of --cluster-secret-file.
const secretEnv = "KVLEASE_CLUSTER_SECRET"

// minSecretBytes is the shortest cluster secret accepted.
const minSecretBytes = 16

// defaultKVBytes bounds the KV arena --num-blocks 0 picks.
const defaultKVBytes = 1 << 30

// serveFlags are kvlease serve's flags, parsed and checked.
type serveFlags struct {
	host, advertiseHost string
	port, transferPort  int
	model, profile      string
	prof                synth.Profile
	role                engine.Role
	engineID            string
	numBlocks           int
	blockSize           int
	digestOnly          bool
	kvPrefault          bool
	maxModelLen         int
	sched               sched.Config
	transfer            *xfer.Config // nil: single engine
	secret              []byte
	seed                uint64
	maxBodyBytes        int64
	streamInterval      int
	drain               time.Duration
	logLevel            slog.Level
	cpuProfile          string
	offload             *offload.Config      // nil: no offload
	apiKeys             []string             // required on /v1 and the abort endpoint; none: open
	faults              *httpapi.FaultConfig // the fault-injection API; nil: off
	lora                *httpapi.LoRAConfig  // LoRA adapters; nil: off
	// llm is the model file of --model-file (nil: the simulated model of
	// --profile). The engine built from these flags closes it.
	llm      *llamafile.Model
	threads  int
	kvEvents kvEventsFlags
	tls      *tlsFlags        // HTTPS (--ssl-*): checked and loaded when the engine starts
	kvPeers  *httpapi.KVPeers // --kv-peers; nil: a decode engine dials any prefill endpoint
}

// kvBytesPerToken is the KV of one token in the pool: the model file's
// (float32 K and V) or the profile's.
func (f *serveFlags) kvBytesPerToken() int {
	if f.llm != nil {
		return f.llm.Weights.Config.BytesPerToken()
	}
	return f.prof.BytesPerToken()
}

// poolConfig is the primary pool of f's engine.
func (f *serveFlags) poolConfig() kvblock.Config {
	bpt := f.kvBytesPerToken()
	if f.digestOnly {
		bpt = 0
	}
	// Events feed the KV events publisher; the pool's medium is vLLM's GPU.
	return kvblock.Config{NumBlocks: f.numBlocks, BlockSizeTokens: f.blockSize, BytesPerToken: bpt,
		Events: f.kvEvents.enabled(), Medium: "GPU"}
}

// maxPulledFrameBytes bounds the frames this engine receives from a
// prefill engine once authenticated: a BLOCK of one of its own blocks (a P
// whose blocks differ is misconfigured) or the largest RENEW_ACK.
func (f *serveFlags) maxPulledFrameBytes() int {
	pc := f.poolConfig()
	n := max(wire.BlockPayloadBytes(pc.BlockSizeTokens, pc.BlockSizeTokens*pc.BytesPerToken),
		wire.MaxPayloadBytes(wire.MsgRenewAck))
	return min(n, wire.MaxFrameBytes)
}

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	f, err := parseServeArgs(args, stderr)
	if err != nil && f.llm != nil {
		f.llm.Close()
		f.llm = nil
	}
	return f, err
}

func parseServeArgs(args []string, stderr io.Writer) (serveFlags, error) {
	fs := NewFlagSet("serve", stderr)
	sc := sched.DefaultConfig()
	role := fs.String("role", "both", "prefill, decode or both (both serves whole requests; with a cluster secret it can also act as P and D)")
	host := fs.String("host", "127.0.0.1", "address to listen on, HTTP and transfer (0.0.0.0 for every interface)")
	port := fs.Int("port", 8000, "HTTP port (0 picks a free one)")
	transferPort := fs.Int("transfer-port", 9000, "P/D transfer port of a prefill engine (0 picks a free one)")
	advertise := fs.String("advertise-host", "", "host decode engines dial for this engine's KV (remote_host); default --host, required when --host is a wildcard")
	engineID := fs.String("engine-id", "", "this engine's id among its P/D peers (remote_engine_id); default host:transfer-port")
	model := fs.String("model", "", "served model name; default kvlease-<profile>, or the --model-file's base name")
	noRepack := fs.Bool("no-repack", false, "with --model-file: keep the weights in the file's layout only, no packed copy of the quantised rows for faster steps (llama.cpp's --no-repack; the copy is about the size of those rows)")
	modelFile := fs.String("model-file", "", "a real llama-family model to run on the CPU: a GGUF v3 file (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) or a llama2.c checkpoint; default: the simulated model of --profile")
	tokenizerFile := fs.String("tokenizer-file", "", "the tokenizer.bin of a llama2.c --model-file; default tokenizer.bin beside it")
	threads := fs.Int("threads", 0, "--model-file: worker goroutines of the forward pass; 0 is GOMAXPROCS")
	profile := fs.String("profile", "tiny", "simulated model: "+strings.Join(synth.ProfileNames(), ", ")+" (ignored with --model-file, which brings its own shape)")
	numBlocks := fs.Int("num-blocks", 0, "KV cache blocks; 0 fits the profile's KV in 1 GiB, at most 8192 blocks")
	blockSize := fs.Int("block-size", 16, "tokens per KV block")
	digestOnly := fs.Bool("digest-only", false, "keep per-block checksums instead of KV bytes (large profiles); both ends of a P/D pair must agree")
	kvPrefault := fs.Bool("kv-prefault", false, "fault the whole KV arena in at start (resident from the start; the first requests' KV then lands in memory already mapped)")
	maxModelLen := fs.Int("max-model-len", 0, "longest prompt + output in tokens, at most what the KV cache holds (--num-blocks × --block-size); 0 is the profile's (or the model file's), lowered to that")
	fs.IntVar(&sc.MaxNumSeqs, "max-num-seqs", sc.MaxNumSeqs, "requests in one batch at most")
	fs.IntVar(&sc.MaxNumBatchedTokens, "max-num-batched-tokens", sc.MaxNumBatchedTokens, "tokens computed in one step at most")
	fs.IntVar(&sc.LongPrefillTokenThreshold, "long-prefill-token-threshold", 0, "positions one request computes in a step at most, as vLLM's: a longer prompt is chunked so that decodes keep moving beside it (0: no limit but --max-num-batched-tokens)")
	fs.IntVar(&sc.MaxWaiting, "max-waiting", sc.MaxWaiting, "waiting requests at most (429 with Retry-After beyond)")
	kvLease := fs.Duration("kv-lease", 30*time.Second, "lease on a prefill's blocks; heartbeat, extension and peer grace scale with it (legacy-timeout: its one timeout, default 480s)")
	policy := fs.String("release-policy", "lease", "when P frees leased blocks: lease, vllm, vllm-lease or legacy-timeout")
	maxQueueWait := fs.Duration("kv-max-queue-wait", 0, "lease policy, decode side: a request waiting in the queue for room to pull its remote prefix longer than this gives the lease back (RELEASE fallback) and recomputes the prompt (fallback reason queue_wait); default 4 × --kv-lease (2m); 0s with the flag set: no bound")
	claimTimeout := fs.Duration("kv-claim-timeout", 0, "lease policy: release a lease no decode engine claimed within this long as unclaimed (the proxy dropped the decode leg); default --kv-lease/3 (10s: two heartbeats), at least one heartbeat (--kv-lease/6), under --kv-lease; 0s with the flag set disables it")
	fallback := fs.String("fallback", "recompute", "decode side, when the remote KV cannot be had: recompute or fail")
	secretFile := fs.String("cluster-secret-file", "", "file holding the secret P and D engines share (or set "+secretEnv+")")
	seed := fs.Uint64("seed", 0, "model seed: engines that exchange KV must use the same")
	maxBody := fs.Int64("max-body-bytes", httpapi.DefaultMaxBodyBytes, "largest request body accepted (413 beyond)")
	streamInterval := fs.Int("stream-interval", 1, "tokens per event of a stream, as vLLM's --stream-interval (the first token at once, then every N; 1: an event per token); 0: an event carries whatever tokens are ready")
	drain := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM, time given to requests in flight, and to a prefill engine's outstanding leases, before they are aborted and released")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the engine to this file, from start to shutdown")
	offloadTiers := fs.String("offload", "", "offload tiers for KV blocks: cpu:SIZE, disk:PATH:SIZE or both comma-separated "+
		"(SIZE such as 512MiB, 8G or 4096blocks); empty: no offload")
	var keys keyList
	fs.Var(&keys, "api-key", "require this key as \"Authorization: Bearer KEY\" on /v1/* and the abort endpoint (repeat for several; "+
		"default "+APIKeyEnv+" or "+VLLMAPIKeyEnv+"); /health and /metrics stay open")
	offloadPolicy := fs.String("offload-policy", "store-on-compute", "which blocks go to the offload tiers: "+strings.Join(offload.PolicyNames, ", "))
	leaseSpill := fs.String("lease-spill", "never", "prefill engine with --offload: when leased, unread blocks move to the offload tier and are read back from it: "+
		strings.Join(offload.LeaseSpillNames, ", ")+" (pressure: while the pool is short of free blocks); a decode engine holds no leases and ignores it")
	faultAPI := fs.Bool("enable-fault-api", false, "serve the fault-injection API for router testing ("+httpapi.FaultsPath+
		", and llm-d's X-Return-Error header); needs --admin-key. Never on a production engine")
	adminKey := fs.String("admin-key", "", "--enable-fault-api: the key required as \"Authorization: Bearer KEY\" on "+httpapi.FaultsPath)
	faultSeed := fs.Uint64("fault-seed", 0, "--enable-fault-api: seed of the faults' rate draws, for a reproducible run; 0 draws one")
	maxFaults := fs.Int("max-faults", 64, "--enable-fault-api: active faults at most (409 beyond)")
	kvEvents := kvEventsFlagVars(fs)
	lora := loraFlagVars(fs)
	tlsf := addTLSFlags(fs)
	kvPeers := fs.String("kv-peers", "", "decode engine: the prefill transfer endpoints it may dial, comma-separated CIDR prefixes, IP addresses or host:port "+
		"(10.0.0.0/8,p0.svc:9000); a request naming another gets 400. Default: any")
	if err := ParseFlags(fs, expandLoRAModules(args)); err != nil {
		return serveFlags{}, err
	}
	// Every flag can also come from the environment (KVLEASE_PORT, ...),
	// for containers; the command line wins.
	if err := setFromEnv(fs); err != nil {
		return serveFlags{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	f := serveFlags{host: *host, port: *port, transferPort: *transferPort, advertiseHost: *advertise,
		engineID: *engineID, profile: *profile, blockSize: *blockSize, digestOnly: *digestOnly, kvPrefault: *kvPrefault,
		sched: sc, seed: *seed, maxBodyBytes: *maxBody, streamInterval: *streamInterval, cpuProfile: *cpuProfile, drain: *drain, apiKeys: apiKeys(keys), tls: tlsf}
	switch {
	case *faultAPI && strings.TrimSpace(*adminKey) == "":
		return f, errors.New("--enable-fault-api: needs --admin-key (or KVLEASE_ADMIN_KEY): the fault API can break any request")
	case *faultAPI && *maxFaults < 1:
		return f, errors.New("--max-faults: want at least 1")
	case *faultAPI:
		f.faults = &httpapi.FaultConfig{AdminKey: *adminKey, Seed: *faultSeed, MaxActive: *maxFaults}
	}
	var err error
	if _, err = tlsf.check(); err != nil {
		return f, err
	}
	if *kvPeers != "" {
		if f.kvPeers, err = httpapi.ParseKVPeers(*kvPeers); err != nil {
			return f, fmt.Errorf("--kv-peers %v", err)
		}
	}
	if f.kvEvents, err = kvEvents(); err != nil {
		return f, err
	}
	if f.lora, err = lora.config(set, *modelFile != ""); err != nil {
		return f, err
	}
	if f.lora != nil {
		f.sched.MaxLoRAs = f.lora.MaxLoRAs
	}
	if f.role, err = engine.ParseRole(*role); err != nil {
		return f, fmt.Errorf("--role %q: want prefill, decode or both", *role)
	}
	var ok bool
	if f.prof, ok = synth.LookupProfile(*profile); !ok {
		return f, fmt.Errorf("--profile %q: want one of %s", *profile, strings.Join(synth.ProfileNames(), ", "))
	}
	if *tokenizerFile != "" && *modelFile == "" {
		return f, errors.New("--tokenizer-file: goes with --model-file")
	}
	if *noRepack && *modelFile == "" {
		return f, errors.New("--no-repack: goes with --model-file")
	}
	if *modelFile != "" {
		switch {
		case *digestOnly:
			return f, errors.New("--digest-only: a --model-file computes real KV bytes; drop --digest-only")
		case *threads < 0:
			return f, errors.New("--threads: want 0 (GOMAXPROCS) or a positive count")
		}
		llm, err := llamafile.OpenWith(*modelFile, *tokenizerFile, llamafile.Options{NoRepack: *noRepack})
		if err != nil {
			return f, fmt.Errorf("--model-file: %w", err)
		}
		f.llm, f.threads = llm, *threads
		f.profile = string(llm.Format)
	}
	if err := f.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return f, fmt.Errorf("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	if err := CheckPort("--port", *port); err != nil {
		return f, err
	}
	if err := CheckPort("--transfer-port", *transferPort); err != nil {
		return f, err
	}
	f.model = *model
	if f.model == "" {
		f.model = "kvlease-" + *profile
		if f.llm != nil {
			f.model = f.llm.Name()
		}
	}
	f.maxModelLen = *maxModelLen
	if f.maxModelLen == 0 {
		f.maxModelLen = f.prof.MaxModelLen
		if f.llm != nil {
			f.maxModelLen = f.llm.Weights.Config.MaxSeqLen
		}
	}
	f.numBlocks = *numBlocks
	if f.numBlocks == 0 && *blockSize > 0 {
		per := *blockSize * f.kvBytesPerToken()
		f.numBlocks = max(1, min(8192, defaultKVBytes/per))
	}
	for _, c := range []struct {
		name string
		ok   bool
		want string
	}{
		{"--model", len(f.model) <= 256 && !strings.ContainsAny(f.model, " \t\n"), "a name of at most 256 bytes without spaces"},
		{"--block-size", *blockSize >= 1 && *blockSize <= 1024, "1..1024 tokens"},
		{"--num-blocks", f.numBlocks >= 1 && f.numBlocks <= 1<<24, "1..16777216 blocks (0 for the default)"},
		{"--max-model-len", f.maxModelLen >= 2 && f.maxModelLen <= 1<<24, "2..16777216 tokens (0 for the profile's)"},
		{"--max-num-seqs", sc.MaxNumSeqs >= 1, "a positive count"},
		{"--max-num-batched-tokens", sc.MaxNumBatchedTokens >= 1, "a positive count"},
		{"--long-prefill-token-threshold", sc.LongPrefillTokenThreshold >= 0, "0 or a positive count"},
		{"--max-waiting", sc.MaxWaiting >= 1, "a positive count"},
		{"--kv-lease", *kvLease > 0 && *kvLease <= openai.MaxLeaseExpiresInMS*time.Millisecond, "a positive duration up to 24h, such as 30s"},
		{"--max-body-bytes", *maxBody > 0, "a positive number of bytes"},
		{"--stream-interval", *streamInterval >= 0, "0 or a positive number of tokens"},
		{"--drain-timeout", *drain >= 0, "a duration such as 30s"},
		{"--engine-id", len(*engineID) <= wire.MaxEngineIDBytes, fmt.Sprintf("at most %d bytes", wire.MaxEngineIDBytes)},
	} {
		if !c.ok {
			return f, fmt.Errorf("%s: want %s", c.name, c.want)
		}
	}
	// As vLLM, a context the KV cache cannot hold is refused at start; the
	// profile's or the file's own length is lowered to what the pool holds
	// instead, so /v1/models (and the router) see the length the engine can
	// serve and a longer request gets a 400 up front rather than a sequence
	// cut at the pool's capacity.
	if capTokens := f.numBlocks * *blockSize; f.maxModelLen > capTokens {
		if set["max-model-len"] {
			return f, fmt.Errorf("--max-model-len %d: larger than the %d tokens the KV cache holds (--num-blocks %d × --block-size %d); "+
				"give more --num-blocks or a smaller --max-model-len", f.maxModelLen, capTokens, f.numBlocks, *blockSize)
		}
		f.maxModelLen = max(capTokens, 2)
	}
	if !f.digestOnly {
		arena := int64(f.numBlocks) * int64(*blockSize) * int64(f.kvBytesPerToken())
		if arena > 64<<30 {
			return f, fmt.Errorf("--num-blocks %d: %d GiB of KV for profile %s; give fewer blocks or --digest-only",
				f.numBlocks, arena>>30, f.profile)
		}
	}

	// Offload: the tiers are sized against the pool, so a size too small
	// for one block fails here, naming --offload.
	tiers, err := offload.ParseTiers(*offloadTiers)
	if err != nil {
		return f, err
	}
	pol, err := offload.ParsePolicy(*offloadPolicy)
	if err != nil {
		return f, err
	}
	spill, err := offload.ParseLeaseSpill(*leaseSpill)
	if err != nil {
		return f, err
	}
	if spill != offload.LeaseSpillNever && len(tiers) == 0 {
		return f, fmt.Errorf("--lease-spill %s: give the tiers with --offload (such as --offload cpu:1GiB)", spill)
	}
	if len(tiers) > 0 {
		oc := offload.DefaultConfig(tiers)
		oc.Policy = pol
		oc.LeaseSpill = spill
		if err := oc.ValidateFor(f.poolConfig()); err != nil {
			return f, err
		}
		f.offload = &oc
	} else if set["offload-policy"] {
		return f, fmt.Errorf("--offload-policy %s: give the tiers with --offload (such as --offload cpu:1GiB)", pol)
	}

	// The P/D transfer: required by the prefill and decode roles, enabled
	// by a secret for both.
	f.secret, err = readSecret(*secretFile)
	if err != nil {
		return f, err
	}
	if f.role != engine.RoleBoth && f.secret == nil {
		return f, fmt.Errorf("--role %s needs the cluster secret its P/D peers share: make one with "+
			"`openssl rand -hex 32 > kvlease.secret && chmod 600 kvlease.secret` and pass --cluster-secret-file kvlease.secret "+
			"to every engine (or set %s)", f.role, secretEnv)
	}
	if f.secret != nil {
		p, err := xfer.ParsePolicy(*policy)
		if err != nil {
			return f, fmt.Errorf("--release-policy %q: want lease, vllm, vllm-lease or legacy-timeout", *policy)
		}
		tc := xfer.DefaultConfig(p)
		if p == xfer.PolicyLegacyTimeout {
			if set["kv-lease"] {
				tc.LeaseDuration = *kvLease
			}
		} else {
			tc = tc.WithLease(*kvLease)
		}
		if set["kv-claim-timeout"] {
			if p != xfer.PolicyLease {
				return f, fmt.Errorf("--kv-claim-timeout: the claim deadline is part of --release-policy lease only, not %s", p)
			}
			if *claimTimeout < 0 {
				return f, fmt.Errorf("--kv-claim-timeout: want a duration of at least --kv-lease/6 (%v), or 0s to disable", tc.HeartbeatInterval)
			}
			tc.ClaimTimeout = *claimTimeout
		}
		if set["kv-max-queue-wait"] {
			if p != xfer.PolicyLease {
				return f, fmt.Errorf("--kv-max-queue-wait: the queue bound is part of --release-policy lease only, not %s", p)
			}
			if *maxQueueWait < 0 {
				return f, fmt.Errorf("--kv-max-queue-wait: want a duration, or 0s for no bound")
			}
			tc.MaxQueueWait = *maxQueueWait
		}
		if tc.Fallback, err = xfer.ParseFallback(*fallback); err != nil {
			return f, fmt.Errorf("--fallback %q: want recompute or fail", *fallback)
		}
		if err := tc.Validate(); err != nil {
			return f, fmt.Errorf("--kv-lease/--kv-claim-timeout/--release-policy: %v", err)
		}
		// The lease events are P's: a decode engine has no leases.
		tc.LeaseEvents = f.kvEvents.leaseTopic != "" && f.role != engine.RoleDecode
		f.transfer = &tc
	} else {
		if _, err := xfer.ParsePolicy(*policy); err != nil {
			return f, fmt.Errorf("--release-policy %q: want lease, vllm, vllm-lease or legacy-timeout", *policy)
		}
		if _, err := xfer.ParseFallback(*fallback); err != nil {
			return f, fmt.Errorf("--fallback %q: want recompute or fail", *fallback)
		}
	}
	if f.kvEvents.leaseTopic != "" && !f.servesLeases() {
		return f, fmt.Errorf("--kv-events-lease-topic: leases are a prefill engine's (--role prefill, or both with a cluster secret), not this one's")
	}
	if f.advertiseHost == "" {
		f.advertiseHost = f.host
	}
	if f.servesLeases() {
		if ip := net.ParseIP(strings.Trim(f.advertiseHost, "[]")); ip != nil && ip.IsUnspecified() {
			return f, fmt.Errorf("--advertise-host: --host %s listens on every interface; name the host decode engines should dial", f.host)
		}
	}
	return f, nil
}

// servesLeases reports whether the engine grants leases (a transfer
// producer): it then listens on --transfer-port.
func (f *serveFlags) servesLeases() bool { return f.transfer != nil && f.role != engine.RoleDecode }

// readSecret reads the cluster secret from file, or from the environment
// when file is empty; nil when neither gives one.
func readSecret(file string) ([]byte, error) {
	var raw string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--cluster-secret-file: %v", err)
		}
		raw = string(b)
	} else if raw = os.Getenv(secretEnv); raw == "" {
		return nil, nil
	}
	s := strings.TrimSpace(raw)
	if len(s) < minSecretBytes {
		where := "--cluster-secret-file " + file
		if file == "" {
			where = secretEnv
		}
		return nil, fmt.Errorf("%s: the secret is %d bytes; use at least %d (openssl rand -hex 32 makes a good one)",
			where, len(s), minSecretBytes)
	}
	return []byte(s), nil
}

// StartEngine starts, in this process, the engine that kvlease serve with
// args runs, logging to log, and serves it until stop (or ctx's end):
// the demo's single reference engine.
func StartEngine(ctx context.Context, args []string, log *slog.Logger) (url string, stop func(), err error) {
	f, err := parseServeFlags(args, io.Discard)
	if err != nil {
		return "", nil, err
	}
	es, err := startEngine(f, log)
	if err != nil {
		return "", nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		es.Run(runCtx)
	}()
	return es.URL(), func() { cancel(); <-done }, nil
}

// engineServer is a running engine: its node, its HTTP server and their
// listeners. kvlease serve runs one; tests may run several in a process.
type engineServer struct {
	f    serveFlags
	log  *slog.Logger
	node *node.Node
	api  *httpapi.Server
	http *httpserver.Server
	ln   net.Listener
	tr   *tcp.Transport
	set  *tier.Set // offload tiers, nil without; the node closes them when it runs
	// events publishes the KV events; nil without --kv-events-endpoint.
	events *kvevents.Publisher
	// workers run a model file's forward pass; closed with the model when
	// the engine ends.
	workers *llamafile.Workers
	urlStr  string
}

// startEngine builds the engine of f and binds its listeners; Run serves.
func startEngine(f serveFlags, log *slog.Logger) (*engineServer, error) {
	es := &engineServer{f: f, log: log}
	var ncfg node.Config
	ncfg.Logger = log
	engineID := f.engineID
	if f.transfer != nil {
		// Lent block data is valid until the next Poll: the node hands each
		// received block to the consumer, which copies it into the pool
		// before then, so the receiver reuses its buffers instead of
		// allocating 2 MiB per block (BenchmarkTransfer: 0.17x -> 0.8-0.9x
		// of a plain socket).
		tr, err := tcp.New(tcp.Config{Logger: log, LendBlockData: true, MaxFrameBytes: f.maxPulledFrameBytes(),
			Secret: f.secret}) // frames after the handshake sealed
		if err != nil {
			return nil, err
		}
		es.tr = tr
		if f.servesLeases() {
			if err := tr.Listen(net.JoinHostPort(f.host, strconv.Itoa(f.transferPort))); err != nil {
				tr.Shutdown()
				return nil, fmt.Errorf("--host/--transfer-port: %v", err)
			}
			ncfg.AdvertiseHost = f.advertiseHost
			if engineID == "" {
				_, port, _ := net.SplitHostPort(string(tr.Addr()))
				engineID = net.JoinHostPort(f.advertiseHost, port)
			}
		}
		ncfg.Transport = tr
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		es.close()
		return nil, fmt.Errorf("--host/--port: %v", err)
	}
	es.ln = ln
	if engineID == "" {
		engineID = "kvlease-" + ln.Addr().String()
	}
	vocab, eos := f.prof.VocabSize, f.prof.EOS
	var cvocab *constrain.Vocab // nil: the byte vocabulary
	if f.llm != nil {
		vocab, eos = f.llm.Weights.Config.VocabSize, f.llm.Weights.Config.EOS
		cvocab = f.llm.Vocab()
	}
	cfg := engine.Config{
		Pool:        f.poolConfig(),
		Sched:       f.sched,
		MaxModelLen: f.maxModelLen, VocabSize: vocab, EOS: eos, Vocab: cvocab,
		RecentFinished: 4096,
		Role:           f.role, EngineID: engineID, Transfer: f.transfer, Secret: f.secret,
		Offload: f.offload,
	}
	if f.secret == nil {
		// No cluster to agree with: a key of its own, so nobody can build
		// colliding prompts offline. (With a secret the core derives the
		// key from it.)
		rand.Read(cfg.HashKey[:])
	}
	if err := cfg.Validate(); err != nil {
		es.close()
		return nil, fmt.Errorf("invalid engine configuration: %v", err)
	}
	// Lease ids and tokens come from this source: it must be unpredictable.
	var seed [32]byte
	rand.Read(seed[:])
	core := engine.NewCore(cfg, mrand.New(mrand.NewChaCha8(seed)))
	// Huge pages for the KV arena where the kernel gives them, and with
	// --kv-prefault every page faulted in now rather than by the first
	// requests that land in it.
	node.PrepareKV(core.Pool(), f.kvPrefault)
	if c := core.Consumer(); c != nil {
		// Failed dials and handshakes (a wrong secret, an endpoint that is
		// not a prefill engine) are logged at WARN, rate-limited per peer.
		c.SetLogger(log)
	}
	if ncfg.Offload, err = node.OpenOffload(core); err != nil {
		es.close()
		return nil, err
	}
	es.set = ncfg.Offload
	// The metrics read the node, which is made below and never scraped
	// before it exists; the node feeds the pull durations to them.
	m := metrics.New(f.model, metrics.SourceFunc(func() engine.NodeStats { return es.node.Stats() }))
	if es.tr != nil {
		m.AddTransport(es.tr)
	}
	ncfg.OnTransfer = func(d xfer.Done) {
		if d.Outcome == xfer.Pulled {
			m.ObserveTransfer(d.Duration)
		}
	}
	if f.kvEvents.enabled() {
		es.events, err = startKVEvents(f.kvEvents, m.Registry(), log, &ncfg)
		if err != nil {
			es.close()
			return nil, err
		}
	}
	var exec model.Executor
	var tok httpapi.Tokenizer
	if f.llm != nil {
		es.workers = llamafile.NewWorkers(f.threads)
		if exec, err = llama.New(f.llm.Weights, core.Pool(), es.workers); err != nil {
			es.close()
			return nil, err
		}
		tok = f.llm
		// The forward pass computes for real (seconds per prefill step
		// on a CPU): off the loop, which keeps serving leases meanwhile.
		ncfg.AsyncExecute = true
	} else {
		exec = synth.New(f.prof, core.Pool(), f.seed)
	}
	es.node = node.New(core, exec, ncfg)
	es.api, err = httpapi.New(es.node, httpapi.Config{ModelName: f.model, MaxBodyBytes: f.maxBodyBytes, StreamInterval: f.streamInterval,
		Version: Version(), Logger: log, Metrics: m, APIKeys: openai.NewAPIKeys(f.apiKeys...), Tokenizer: tok,
		Faults: f.faults, LoRA: f.lora, KVPeers: f.kvPeers})
	if err != nil {
		es.close()
		return nil, err
	}
	if f.transfer != nil && f.role != engine.RolePrefill && f.kvPeers == nil {
		log.Info("no --kv-peers: this engine dials any prefill transfer endpoint a request's kv_transfer_params names; " +
			"keep it behind the proxy or set --kv-peers")
	}
	es.http = &httpserver.Server{
		Handler:           es.api,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       5 * time.Minute,
		Logger:            log,
	}
	httpserver.SetBounds(es.http)
	if f.tls != nil {
		if es.http.TLSConfig, err = f.tls.config(log); err != nil {
			es.close()
			return nil, err
		}
	}
	es.urlStr = scheme(es.http.TLSConfig) + "://" + ln.Addr().String()
	return es, nil
}

// close releases the listeners of an engine that will not run.
func (es *engineServer) close() {
	if es.ln != nil {
		es.ln.Close()
	}
	if es.tr != nil {
		es.tr.Shutdown()
	}
	if es.set != nil {
		es.set.Close()
	}
	es.closeModel()
}

// closeModel stops the forward pass's workers, unmaps the model file and
// closes the KV events publisher, once the node no longer executes.
func (es *engineServer) closeModel() {
	if es.events != nil {
		es.events.Close()
		es.events = nil
	}
	if es.workers != nil {
		es.workers.Close()
		es.workers = nil
	}
	if es.f.llm != nil {
		es.f.llm.Close()
		es.f.llm = nil
	}
}

// URL is the engine's HTTP base URL.
func (es *engineServer) URL() string { return es.urlStr }

// Run serves until ctx ends, then shuts down gracefully (docs/scenarios.md S23):
// the engine stops admitting (new requests get 503, /health 503), the HTTP
// listener closes, and within the drain timeout requests in flight finish
// and a prefill engine keeps serving its outstanding leases over the
// transfer port until they are read, released or expire. When nothing is
// left (or at the timeout: leases still live are then released, requests
// still running aborted, their clients seeing finish_reason abort) Run
// returns nil.
func (es *engineServer) Run(ctx context.Context) error {
	nodeCtx, stopNode := context.WithCancel(context.Background())
	defer stopNode()
	go es.node.Run(nodeCtx)
	served := make(chan error, 1)
	go func() { served <- es.http.Serve(es.ln) }()

	select {
	case <-ctx.Done():
	case err := <-served:
		stopNode()
		<-es.node.Done()
		es.closeModel()
		return fmt.Errorf("serving HTTP: %v", err)
	}
	start := time.Now()
	deadline := start.Add(es.f.drain)
	st := es.node.Stats()
	leases := 0
	if st.Producer != nil {
		leases = st.Producer.Active
	}
	es.log.Info("draining", "timeout", es.f.drain, "requests", st.Requests, "leases", leases)
	es.node.DrainBy(deadline)
	drainCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- es.http.Shutdown(drainCtx) }()
	if err := es.node.WaitDrained(drainCtx); err != nil {
		// Out of time: abort what is left; its handlers then answer and
		// return. (The node released its leases at the deadline.)
		es.log.Warn("drain timeout: aborting the requests in flight", "timeout", es.f.drain)
	}
	stopNode()
	<-es.node.Done()
	es.closeModel()
	if err := <-shut; err != nil {
		// The handlers have their aborted outputs; give them a moment to
		// write them, then cut what remains.
		grace, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = es.http.Shutdown(grace)
		cancel()
		if err != nil {
			es.http.Close()
		}
	}
	st = es.node.Stats()
	attrs := []any{"drained_in", time.Since(start).Round(time.Millisecond),
		"aborted", st.Finished[sched.FinishedAborted], "held_blocks", st.Pool.Held}
	if p := st.Producer; p != nil {
		attrs = append(attrs, "leases_read", p.Released[wire.ReasonReadDone], "leases_ended_at_shutdown", p.Released[wire.ReasonShutdown])
	}
	es.log.Info("stopped", attrs...)
	return nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: f.logLevel}))
	if f.llm != nil && f.llm.Chat.Fallback != "" {
		log.Warn("chat: the model's own chat template is not used", "family", f.llm.Chat.Family.String(), "reason", f.llm.Chat.Fallback)
	}
	if f.cpuProfile != "" {
		stop, err := StartCPUProfile(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer stop()
	}
	es, err := startEngine(f, log)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("kvlease serve on %s: model %s (profile %s), role %s, %d blocks of %d tokens",
		es.URL(), f.model, f.profile, f.role, f.numBlocks, f.blockSize)
	if oc := f.offload; oc != nil {
		tiers := make([]string, len(oc.Tiers))
		for i, t := range oc.Tiers {
			tiers[i] = t.String()
		}
		msg += fmt.Sprintf(", offload %s (policy %s, lease spill %s)", strings.Join(tiers, ","), oc.Policy, oc.LeaseSpill)
	}
	if ep, ok := es.node.TransferEndpoint(); ok {
		msg += fmt.Sprintf(", transfer on %s (engine id %s, policy %s)", ep.Addr(), ep.EngineID, f.transfer.Policy)
	}
	if p := es.events; p != nil {
		msg += fmt.Sprintf(", kv events on tcp://%s (%s encoding", p.Addr(), f.kvEvents.encoding)
		if ra := p.ReplayAddr(); ra != nil {
			msg += fmt.Sprintf(", replay on tcp://%s", ra)
		}
		msg += ")"
	}
	fmt.Fprintln(stdout, msg)
	log.Info("serving", "url", es.URL(), "model", f.model, "role", f.role.String())
	if f.llm != nil && f.llm.TokenizerNote != "" {
		log.Warn("tokenizer", "model", f.llm.Path, "note", f.llm.TokenizerNote)
	}
	if f.llm != nil && f.llm.Packed > 0 {
		log.Info("weights packed (--no-repack: none)", "model", f.llm.Path, "bytes", f.llm.Packed, "released", f.llm.Released)
	}
	if err := es.Run(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
