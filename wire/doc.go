// Package wire is the binary codec of kvlease's P/D protocol, spoken between
// a decode engine (D) and a prefill engine (P) over one connection per
// (D, P) pair, opened by D. Like etcd's raftpb it defines the messages the
// protocol core (xfer) exchanges; it does no I/O beyond reading frames from
// an io.Reader the caller owns.
//
// # Frames
//
// Every message travels as one frame:
//
//	[4-byte big-endian payload length][1-byte MsgType][payload]
//
// The length counts the payload only, not the type byte. Payload fields are
// fixed-size big-endian integers and byte arrays in declaration order;
// strings carry a 2-byte length, lists a 4-byte count; BLOCK's Data is the
// rest of the payload. The encoding is canonical: Decode refuses trailing
// bytes, undefined Status and Reason values and broken bounds, so a frame
// decodes only if AppendFrame of the result reproduces it byte for byte.
//
// # Sessions
//
//	D→P HELLO{Version, D's id, nonce_D}
//	P→D HELLO_ACK{Version, P's id, nonce_P, MAC = ComputeMAC(secret, RoleP, nonce_D, P, D), Status}
//	D→P AUTH{MAC = ComputeMAC(secret, RoleD, nonce_P, P, D)}
//	P→D AUTH_ACK{Status}
//
// then any number of RENEW/RENEW_ACK, READ/BLOCK…/READ_END,
// RELEASE/RELEASE_ACK and REVOKED. What each means, and which state accepts
// which message, is xfer's business; this package only checks that a
// message is well formed.
//
// # Bounds and errors
//
// Every length and count has an exported bound (MaxFrameBytes,
// MaxEngineIDBytes, MaxLeasesPerRenew, MaxIndexesPerRead, MaxBlockBytes,
// MaxDigestsPerBlock). Decode and ReadFrame enforce them on peer input and
// return errors wrapping the package's sentinels (ErrTruncated,
// ErrFrameTooLarge, ...), never panicking on any input. Encoding a message
// that breaks a bound is a bug of the caller: AppendFrame and
// AppendBlockHeader panic, and Validate lets a caller check a message built
// from untrusted input first.
//
// # Ownership
//
// AppendFrame and AppendBlockHeader append to the caller's buffer and keep
// nothing. Decode copies everything except a BLOCK's Data, which aliases the
// frame; ReadFrame's frame aliases the buffer passed in. Nothing in this
// package holds state, so every function is safe for concurrent use on
// distinct buffers.
package wire
