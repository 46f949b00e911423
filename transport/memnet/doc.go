// Package memnet is a deterministic simulated network for kvlease's P/D
// protocol: the transport of unit tests and of the whole-cluster simulator
// (sim), where every node runs in one goroutine, driven instant by instant.
//
// A Net carries wire.Messages between named nodes (transport.Addr) over
// connections and reports what happens as transport.Events, with the
// contract of package transport. It does no I/O, starts no goroutine and
// reads no clock: each call takes the current clock.Instant, and every random
// choice (latencies, faults) comes from the *rand.Rand given to New. The same
// seed and the same calls produce the same deliveries, in the same order.
//
// # Driving loop
//
//	net := memnet.New(rand.New(rand.NewPCG(seed, 0)), faults)
//	net.Listen("p1")
//	conn := net.Dial(now, "d1", "p1") // d1 gets Dialed (or DialFailed), p1 Accepted
//	for {
//		at := net.Next() // earliest pending event; clock.Never if none
//		... advance the simulated clock to min(at, other deadlines) ...
//		out = net.Deliver(now, out[:0])
//		for _, d := range out {
//			// hand d.Event to the core of node d.To; it answers with
//			// net.Send(now, conn, node, msg) and net.Close(now, conn, node)
//		}
//	}
//
// # Conditions
//
// Conditions set per-message latency and random faults: drops (which break the
// connection, as they would a TCP stream), duplicates and reordering (which
// TCP never does: they test that the protocol cores are idempotent). Faults
// over time are calls: Partition and Heal (traffic is held, not lost, and a
// partition longer than Conditions.PartitionTimeout closes the connections),
// Crash and Restart. A hung node needs nothing from the network: the caller
// simply stops stepping it.
//
// # Bounds
//
// Messages queued towards one end of a connection are bounded
// (Conditions.MaxQueuedPerConn; a Send beyond it breaks the connection), and so
// are live connections (Conditions.MaxConns; a Dial beyond it fails).
//
// # Ownership
//
// The receiver gets the very value the sender sent, except a *wire.Block,
// which Send copies with its Data and Digests: the sender may reuse its
// buffers (the KV pool's memory) at once, as after a socket write, and the
// receiver may keep the copy. Received messages are read-only (a duplicate
// is the same value).
package memnet
