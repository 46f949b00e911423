// Package tcp is kvlease's real P/D transport: wire messages over TCP, one
// connection per (D, P) pair, opened by D. It is an edge: it owns sockets,
// goroutines and the clock, and turns them into transport.Events with the
// per-connection contract of package transport (exactly one of Dialed or
// DialFailed, Accepted first, Received in send order, exactly one Closed
// unless the owner closed the connection itself).
//
// # Driving
//
// One goroutine owns a Transport (the engine node's loop). It calls Dial,
// Send, Writable and Close, waits on Ready and takes events with Poll:
//
//	t, _ := tcp.New(tcp.Config{})
//	t.Listen("127.0.0.1:9000") // P side; D only dials
//	id := t.Dial(ctx, "10.0.0.7:9000")
//	for {
//		<-t.Ready()
//		for _, e := range t.Poll(evs[:0]) { ... t.Send(e.Conn, reply) ... }
//	}
//
// None of Dial, Send, Writable, Close and Poll ever blocks on the network,
// so a slow or dead peer never stalls the owner's loop. Send, Writable and
// Close are safe for concurrent use; Poll, being the one consumer of the
// event queue, belongs to one goroutine.
//
// # Framing
//
// Each message is one frame of package wire ([4-byte length][type][payload]),
// encoded by Send into a buffer of the connection's send queue and read back
// with wire.ReadFrame and wire.Decode. A frame with type byte 0 and an empty
// payload (the five bytes 00 00 00 00 00) is this package's keepalive: an end
// that has written nothing for Config.KeepaliveInterval sends one, and the
// receiving end consumes it without reporting it. Type 0 is not a wire
// message type, so a keepalive can never be mistaken for a message.
//
// # Bounds and failures
//
// Every way a connection can go wrong closes it, and both owners learn it as
// a Closed event whose Reason starts with one of the Reason constants:
//
//   - a received frame over the connection's cap (below), or one that
//     does not decode (garbage): ReasonFrameTooLarge, ReasonBadFrame;
//   - a frame that does not arrive within IdleTimeout + its size /
//     Config.MinReceiveRate of its length prefix: ReasonSlowFrame;
//   - an accepted connection not authenticated within
//     Config.HandshakeTimeout, or dropped as the oldest of too many
//     unauthenticated ones: ReasonHandshakeTimeout, ReasonEvicted;
//   - a send queue over Config.MaxQueuedBytes (the peer reads too slowly):
//     ReasonQueueOverflow, and Send returns false;
//   - a write that does not complete within Config.WriteTimeout:
//     ReasonWriteTimeout;
//   - nothing received, not even a keepalive, for Config.IdleTimeout (the
//     peer is dead, hung below the transport, or cut off): ReasonIdleTimeout;
//   - the peer closed or reset the connection: ReasonClosedByPeer,
//     ReasonTruncated, ReasonReadError.
//
// Events wait for Poll in a queue of at most Config.MaxEvents; while it is
// full, connections stop reading their sockets, and TCP flow control pushes
// back on the peers. Live connections are bounded by Config.MaxConns.
//
// # Bounded before trusted
//
// The transport follows the protocol's handshake (package wire) in the
// messages its owner sends, and bounds a connection by how far it got. An
// accepted connection is authenticated once its owner sends AUTH_ACK with
// StatusOK (the decode engine proved the cluster secret); a dialed one once
// its owner sends AUTH, which an owner must send only after the prefill
// engine proved the secret in its HELLO_ACK (xfer.Consumer does). Until
// then:
//
//   - every received frame is capped at wire.MaxHandshakePayloadBytes
//     (309 bytes), checked on the length prefix before anything is
//     allocated, and read through a 512-byte buffer;
//   - an accepted connection must authenticate within HandshakeTimeout;
//   - accepted unauthenticated connections are bounded in all
//     (MaxUnauthenticated) and per source IP (MaxUnauthenticatedPerSource),
//     the oldest dropped first;
//   - one that ends is counted (Stats.HandshakeFailures) and logged at
//     WARN with the peer and the reason, rate-limited (one line per side
//     and kind of failure per 10 s), as is a handshake the owner refused
//     (a HELLO_ACK or AUTH_ACK it sent with another status than OK).
//
// Once authenticated, a frame is capped by the role's need: on an accepted
// connection (P's) MaxAcceptedFrameBytes, by default the largest RENEW;
// on a dialed one (D's) MaxFrameBytes, which the engine sets to its block
// size. On every connection, a frame must arrive at MinReceiveRate, and the
// bytes of frames being received over all connections stay under
// MaxReceiveBytes (a frame beyond it waits). Stats reports all of it.
//
// # Sealed frames
//
// With Config.Secret (the cluster secret), every frame after the
// handshake is sealed (wire.Sealer: AES-256-GCM under per-session,
// per-direction keys derived from the secret and the handshake's nonces
// and engine ids, the frame's sequence number as nonce). The transport
// follows the handshake to know when: it records the HELLO and HELLO_ACK
// it sends and receives, derives the keys once it has both, seals what it
// writes after this end's AUTH (D) or AUTH_ACK OK (P), and opens what it
// reads after the peer's. Keepalives are sealed too. Sealing is
// pipelined: the writer gives each frame its sequence number in queue
// order and seals the large ones (64 KiB and more: blocks) on goroutines
// of their own, several at once, writing each run of sealed frames while
// the next ones are sealed (a zero-copy BLOCK is copied into a buffer to
// be sealed); the reader numbers each sealed frame as it reads it, opens
// the large ones in place on goroutines of their own and reads on, and
// one deliverer per connection hands them to the owner in order, each
// only once it opened. A frame that does not open closes the connection:
// ReasonTampered, Event.Tampered, Stats.Dropped["tampered"]; the frames
// before it are delivered, none after it.
//
// # Ownership
//
// Send encodes the message before it returns: the caller may reuse or free
// everything the message points to at once (a BLOCK's Data aliases the KV
// pool). SendBlock is the zero-copy alternative for a BLOCK: it encodes
// only the frame's header and fixed fields and the writer writes Data
// straight from the caller's memory (one writev with the header), so the
// caller must keep Data unchanged until the done callback it passed runs
// (exactly once: true once written, false if the connection broke first;
// every done of a connection runs before its Closed event is queued, and
// before Shutdown returns). The engine node streams reads this way: the
// read pins its lease, so the blocks stay unchanged until it reports the
// read finished, which it does only after every block's done. A received
// *wire.Block owns its Data; every received message
// belongs to the owner. With Config.LendBlockData, a received Block's Data
// is lent instead: valid until the owner's next Poll, which recycles the
// buffer (for an owner that copies each block out while handling its
// Poll's events; it spares the reader a fresh allocation per block).
package tcp
