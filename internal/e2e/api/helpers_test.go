package api

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/httpapi"
	"github.com/kvlease/kvlease/httpserver/httpservertest"
	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/kvblock"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/node"
	kvopenai "github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/xfer"
)

const (
	modelName = "kvlease-e2e"
	secret    = "0123456789abcdef0123456789abcdef"
	modelSeed = 11
)

// engineOpts shape an in-process engine.
type engineOpts struct {
	profile    string // default "tiny"; "slow" is slowProfile
	role       engine.Role
	transfer   *xfer.Config // nil: none for role both, the lease defaults otherwise
	maxNumSeqs int
	maxWaiting int
	numBlocks  int
	apiKeys    []string            // required on /v1 and the abort endpoint
	lora       *httpapi.LoRAConfig // LoRA adapters; nil: none
}

// testEngine is one engine served on loopback.
type testEngine struct {
	node *node.Node
	tr   *tcp.Transport // nil without a transfer
	url  string
	stop func()
}

// startEngine starts an engine and its HTTP server on 127.0.0.1; the test's
// cleanup stops both.
func startEngine(t *testing.T, o engineOpts) *testEngine {
	t.Helper()
	if o.profile == "" {
		o.profile = "tiny"
	}
	if o.numBlocks == 0 {
		o.numBlocks = 1024
	}
	prof, _ := synth.LookupProfile(o.profile)
	if o.profile == "slow" {
		prof = slowProfile()
	}
	sc := sched.DefaultConfig()
	if o.maxNumSeqs > 0 {
		sc.MaxNumSeqs = o.maxNumSeqs
	}
	if o.maxWaiting > 0 {
		sc.MaxWaiting = o.maxWaiting
	}
	if o.lora != nil {
		sc.MaxLoRAs = max(o.lora.MaxLoRAs, 1)
	}
	cfg := engine.Config{
		Pool:        kvblock.Config{NumBlocks: o.numBlocks, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sc,
		MaxModelLen: 4096, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 1024,
		Role:           o.role,
	}
	var ncfg node.Config
	var tr *tcp.Transport
	if o.transfer == nil && o.role != engine.RoleBoth {
		tc := xfer.DefaultConfig(xfer.PolicyLease)
		o.transfer = &tc
	}
	if o.transfer != nil {
		var err error
		tr, err = tcp.New(tcp.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if o.role != engine.RoleDecode {
			if err := tr.Listen("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
		}
		ncfg.Transport = tr
		cfg.Transfer, cfg.Secret = o.transfer, []byte(secret)
		cfg.EngineID = o.role.String() + "-" + strconv.Itoa(rand.IntN(1e6))
	}
	core := engine.NewCore(cfg, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	node := node.New(core, synth.New(prof, core.Pool(), modelSeed), ncfg)
	ctx, cancel := context.WithCancel(context.Background())
	go node.Run(ctx)
	api, err := httpapi.New(node, httpapi.Config{ModelName: modelName, Version: "e2e",
		APIKeys: kvopenai.NewAPIKeys(o.apiKeys...), LoRA: o.lora})
	if err != nil {
		t.Fatal(err)
	}
	ts := httpservertest.NewServer(api)
	e := &testEngine{node: node, tr: tr, url: ts.URL}
	var once bool
	e.stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		<-node.Done()
		ts.Close()
	}
	t.Cleanup(e.stop)
	return e
}

// slowProfile is tiny with 25 ms decode steps. The modelled step time is a
// lower bound of the engine's wall time, so a request of 3000 tokens runs
// for at least 75 s: a test acting on it while it runs (a full queue, a
// disconnect) finds it running however loaded the machine, and ends it, so
// it costs the test no time.
func slowProfile() synth.Profile {
	p, _ := synth.LookupProfile("tiny")
	p.Name, p.DecodePerStep = "slow", 25*time.Millisecond
	return p
}

// client is an SDK client of e without retries, so each error is seen.
func (e *testEngine) client(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(e.url + "/v1/"),
		option.WithAPIKey("unused"), option.WithMaxRetries(0)}, opts...)...)
}

// metric is e2e.Metric of the engine.
func (e *testEngine) metric(t *testing.T, series string) float64 {
	t.Helper()
	return e2e.Metric(t, e.url, series)
}

// held is the engine's held blocks, as /metrics says.
func (e *testEngine) held(t *testing.T) float64 {
	return e.metric(t, `kvlease_kv_blocks{model_name="`+modelName+`",state="held"}`)
}
