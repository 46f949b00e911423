package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/kvevents"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/xfer"
)

// envPrefix names the environment variables that set serve's flags:
// --kv-events-topic is KVLEASE_KV_EVENTS_TOPIC. A flag on the command line
// wins over the environment.
const envPrefix = "KVLEASE_"

// envName is the environment variable of flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// setFromEnv sets every flag of fs that the command line did not set and
// whose environment variable is set and not empty. Call it after parsing
// the command line: a flag given there wins over the environment (for a
// repeatable flag such as --api-key the environment then adds nothing).
func setFromEnv(fs *flag.FlagSet) error {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || onCommandLine[f.Name] {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok || v == "" {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q (--%s): %v", envName(f.Name), v, f.Name, e)
		}
	})
	return err
}

// kvEventsFlags are serve's KV events flags.
type kvEventsFlags struct {
	endpoint, replay, topic string
	leaseTopic              string
	encoding                kvevents.Encoding
	replayBatches, queue    int
}

func (k *kvEventsFlags) enabled() bool { return k.endpoint != "" }

// kvEventsFlagVars defines the flags on fs; check parses them after
// fs.Parse.
func kvEventsFlagVars(fs *flag.FlagSet) (check func() (kvEventsFlags, error)) {
	endpoint := fs.String("kv-events-endpoint", "", "publish KV cache events as vLLM does on this ZMQ PUB endpoint, such as tcp://*:5557; empty: off")
	replay := fs.String("kv-events-replay-endpoint", "", "ZMQ ROUTER endpoint answering replay requests (8-byte start sequence), such as tcp://*:5558; empty: no replay")
	topic := fs.String("kv-events-topic", "", "topic frame of every KV events message (llm-d's router subscribes to kv@<pod-ip>:<port>@<model>)")
	leaseTopic := fs.String("kv-events-lease-topic", "", "also publish this prefill engine's lease events (granted, claimed, renewed, released with a reason) on the KV events socket under this topic, which must not be a prefix of --kv-events-topic nor have it as a prefix; empty: off")
	encoding := fs.String("kv-events-encoding", "map", "msgpack layout of the events, in a positional batch [ts, events, rank]: map (vLLM since v0.26.0: each event a map, tag under \"type\"; what llm-d's router decodes) or array (vLLM before it: positional events, tag first)")
	replayBatches := fs.Int("kv-events-buffer", kvevents.DefaultReplayBatches, "batches kept for replay")
	queue := fs.Int("kv-events-queue", kvevents.DefaultQueueBatches, "batches queued between the engine and the publisher; beyond it a batch is dropped and counted, the engine never waits")
	return func() (kvEventsFlags, error) {
		k := kvEventsFlags{endpoint: *endpoint, replay: *replay, topic: *topic, leaseTopic: *leaseTopic,
			replayBatches: *replayBatches, queue: *queue}
		var err error
		if k.encoding, err = kvevents.ParseEncoding(*encoding); err != nil {
			return k, fmt.Errorf("--kv-events-encoding %q: want map or array", *encoding)
		}
		if k.endpoint != "" {
			if _, err := kvevents.ListenAddr(k.endpoint); err != nil {
				return k, fmt.Errorf("--kv-events-endpoint: %v", err)
			}
		}
		if k.replay != "" {
			if k.endpoint == "" {
				return k, fmt.Errorf("--kv-events-replay-endpoint: give --kv-events-endpoint too (such as tcp://*:5557)")
			}
			if _, err := kvevents.ListenAddr(k.replay); err != nil {
				return k, fmt.Errorf("--kv-events-replay-endpoint: %v", err)
			}
		}
		if len(k.topic) > 255 {
			return k, fmt.Errorf("--kv-events-topic: at most 255 bytes")
		}
		if k.leaseTopic != "" {
			if k.endpoint == "" {
				return k, fmt.Errorf("--kv-events-lease-topic: give --kv-events-endpoint too (such as tcp://*:5557)")
			}
			if err := kvevents.CheckLeaseTopic(k.topic, k.leaseTopic); err != nil {
				return k, fmt.Errorf("--kv-events-lease-topic: %v", err)
			}
		}
		if k.replayBatches < 1 || k.replayBatches > 1<<20 {
			return k, fmt.Errorf("--kv-events-buffer: want 1..1048576 batches")
		}
		if k.queue < 1 || k.queue > 1<<20 {
			return k, fmt.Errorf("--kv-events-queue: want 1..1048576 batches")
		}
		return k, nil
	}
}

// startKVEvents starts the publisher of k, registers its counters and
// sets the node's OnEvents hook (and OnLeaseEvents with a lease topic).
func startKVEvents(k kvEventsFlags, reg prometheus.Registerer, log *slog.Logger, ncfg *node.Config) (*kvevents.Publisher, error) {
	p, err := kvevents.New(kvevents.Config{Endpoint: k.endpoint, ReplayEndpoint: k.replay, Topic: k.topic, LeaseTopic: k.leaseTopic,
		Encoding: k.encoding, ReplayBatches: k.replayBatches, QueueBatches: k.queue, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--kv-events-endpoint: %v", err)
	}
	counter := func(name, help string, v func(kvevents.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return v(p.Stats()) })
	}
	reg.MustRegister(
		counter("kvlease_kv_events_published_total", "KV event batches published (each with a sequence number).",
			func(s kvevents.Stats) float64 { return float64(s.Published) }),
		counter("kvlease_kv_events_dropped_total", "KV event batches dropped because the publisher's queue was full (no sequence number used).",
			func(s kvevents.Stats) float64 { return float64(s.DroppedBatches) }),
		counter("kvlease_kv_events_subscriber_drops_total", "KV event messages a slow subscriber missed (its own queue was full; it can replay them).",
			func(s kvevents.Stats) float64 { return float64(s.SubscriberDrops) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvlease_kv_events_subscribers", Help: "KV events subscribers connected."},
			func() float64 { return float64(p.Stats().Subscribers) }),
	)
	ncfg.OnEvents = func(evs []kvblock.Event) { p.Publish(time.Now(), evs) }
	if k.leaseTopic != "" {
		reg.MustRegister(counter("kvlease_kv_events_lease_published_total",
			"Lease event batches published on --kv-events-lease-topic (their own sequence numbers).",
			func(s kvevents.Stats) float64 { return float64(s.LeaseBatches) }))
		ncfg.OnLeaseEvents = func(evs []xfer.LeaseEvent) { p.PublishLeases(time.Now(), evs) }
	}
	return p, nil
}
