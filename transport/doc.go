// Package transport holds the types shared by kvlease's P/D transports and
// the protocol cores that use them: transport/tcp (real sockets, an edge) and
// transport/memnet (a deterministic simulated network, pure).
//
// The protocol cores (xfer.Producer on P, xfer.Consumer on D) do no I/O: they
// consume Events and emit messages to send, as values. A transport turns
// sends into Events at the other end. One connection carries one session
// between a decode engine D and a prefill engine P, opened by D.
//
// # Contract
//
// Every transport gives its users these guarantees, per ConnID:
//
//   - The dialer gets exactly one of Dialed or DialFailed. The listener gets
//     Accepted, before anything else on that ConnID. Nothing is Received on
//     an end before its Dialed or Accepted.
//   - Received events arrive in send order, each message once, with no gaps:
//     if a message is lost, nothing sent after it on that connection arrives,
//     and both ends get Closed. (memnet can break this on purpose, with its
//     duplication and reordering faults, to test that the protocol is
//     idempotent; TCP never does.)
//   - An end that was Dialed or Accepted gets Closed exactly once, unless its
//     owner closed it itself (then nothing more is delivered to it). After
//     Closed or DialFailed, nothing more arrives on that ConnID.
//   - Both ends of a connection learn that it is gone: an explicit close by
//     one end is reported to the other, and a fault (lost message, peer
//     crash, partition that outlasts the keepalive timeout) is reported to
//     every end still alive.
//
// A Sent event reports a block queued by an engine's Port.SendBlock
// (engine.Port): the transport referenced the block's memory until then. It
// is not a wire event; the adapters that give the engine loop its Port
// produce it (the node's over transport/tcp, the simulator's over memnet).
//
// Event.Reason is for humans (logs, test failures): protocol cores must not
// branch on its text, which differs between transports.
package transport
