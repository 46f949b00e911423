// Package kvevents publishes an engine's KV cache events in vLLM's format,
// so KV-cache-aware routers (llm-d's precise prefix-cache scorer, Dynamo's
// KV router) can index a kvlease engine as they index vLLM.
//
// It is an edge: a Publisher owns listeners and goroutines. The events come
// from the pool's outbox (kvblock.Event: BlockStored, BlockRemoved,
// AllBlocksCleared, medium GPU) and from the offload tiers (medium CPU or
// DISK), through engine.Core's Ready and engine.Loop's Turn, to the node,
// which hands each turn's events to Publish. Publish never blocks the
// engine: it encodes the batch and queues it, and a full queue drops the
// batch and counts it.
//
// The wire format is vLLM's (vllm/distributed/kv_events.py,
// ZmqEventPublisher): a PUB socket sends each batch as three frames
// [topic, 8-byte big-endian sequence number, msgpack payload], the payload
// being the array [ts, events, data_parallel_rank]; sequence numbers start at 0 and
// grow by one per published batch. A ROUTER socket keeps the last
// Config.ReplayBatches batches: a client sends an 8-byte big-endian start
// sequence and gets every buffered (seq, payload) from there, then seq -1
// with an empty payload. Events are encoded as maps keyed by field name with
// the tag under "type" (vLLM since #42892, v0.26.0 on) or as positional
// arrays with the tag first (older vLLM); the batch around them is an
// array in both, as vLLM sends it and llm-d's decoder reads it. See
// encodeBatch for the fields.
//
// With Config.LeaseTopic, PublishLeases also sends a prefill engine's lease
// events (xfer.LeaseEvent: granted, claimed, renewed, released with a
// reason; encodeLeaseBatch) on the same socket under that topic, numbered
// on their own and not replayed: kvlease's own stream, which no vLLM
// subscriber asks for.
//
// Each subscriber has its own bounded queue written by its own goroutine: a
// subscriber that stops reading misses messages (counted in
// Stats.SubscriberDrops, recoverable by replay) and, after WriteTimeout, is
// disconnected; the other subscribers and the engine do not notice. This is
// why the sockets are ZMTP 3 written here (zmtp.go) rather than a ZMQ
// library: the pure-Go implementation (github.com/go-zeromq/zmq4) writes
// every subscriber from one goroutine without a deadline, so one stalled
// subscriber stops all of them, and it drops silently at its high-water
// mark. The tests talk to the Publisher with zmq4's SUB and DEALER sockets,
// an implementation independent of this one.
package kvevents
