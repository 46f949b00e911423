package wire

// Message is one protocol message. Only the pointer types of this package
// implement it (*Hello, *Renew, ...), so a type switch on a decoded Message
// has exactly one case per type.
type Message interface {
	Type() MsgType
}

// Hello opens a session (D→P). Nonce is D's fresh random challenge: P proves
// it knows the cluster secret with HelloAck.MAC over it.
type Hello struct {
	Version  uint16 // protocol version D speaks (Version)
	EngineID string // D's engine id, at most MaxEngineIDBytes bytes
	Nonce    [16]byte
}

// HelloAck answers a Hello (P→D). When Status is StatusOK, MAC is
// ComputeMAC(secret, RoleP, hello.Nonce, P's id, D's id) and Nonce is P's
// challenge, answered by Auth. Otherwise (StatusBadVersion, StatusBusy,
// StatusShuttingDown, ...) MAC and Nonce carry nothing and P closes the
// session; with StatusBadVersion, Version is the version P speaks.
type HelloAck struct {
	Version  uint16
	EngineID string // P's engine id, at most MaxEngineIDBytes bytes
	Nonce    [16]byte
	MAC      [32]byte
	Status   Status
}

// Auth is D's proof (D→P): MAC is ComputeMAC(secret, RoleD, helloAck.Nonce,
// P's id, D's id).
type Auth struct {
	MAC [32]byte
}

// AuthAck ends the handshake (P→D): StatusOK, or StatusUnauthenticated and
// P closes the session.
type AuthAck struct {
	Status Status
}

// LeaseRef names a lease and proves the right to it.
type LeaseRef struct {
	ID    LeaseID
	Token Token
}

// Renew is D's batched heartbeat to one P (D→P): it extends and binds every
// listed lease. Seq matches the RenewAck. At most MaxLeasesPerRenew leases.
type Renew struct {
	Seq    uint64
	Leases []LeaseRef
}

// RenewResult is P's answer for one lease of a Renew. ExpiresInMs is the time
// left on the lease after the renewal when Status is StatusOK, in whole
// milliseconds rounded down, never negative; 0 otherwise.
type RenewResult struct {
	ID          LeaseID
	Status      Status
	ExpiresInMs uint32
}

// RenewAck answers a Renew (P→D), one result per lease, same Seq. At most
// MaxLeasesPerRenew results.
type RenewAck struct {
	Seq     uint64
	Results []RenewResult
}

// Read pulls blocks of a lease (D→P). Indexes are positions in the lease's
// block list (remote_block_ids of kv_transfer_params), at most
// MaxIndexesPerRead. ReadID is chosen by D and unique within its session; P
// answers with one Block per index, then a ReadEnd.
type Read struct {
	ReadID  uint64
	Lease   LeaseID
	Token   Token
	Indexes []uint32
}

// Block carries one block of a Read (P→D).
//
// Tokens is the number of filled token slots (at most MaxDigestsPerBlock) and
// Digests holds exactly one content digest per filled slot. Checksum covers
// the block as the protocol core defines it. Data is the KV bytes, at most
// MaxBlockBytes, and is empty in digest-only mode.
//
// A Block returned by Decode aliases the decoded frame in Data (not in
// Digests, which is freshly allocated): it is valid only as long as the
// frame's buffer is, and must be copied out before the buffer is reused
// (ReadFrame reuses it on its next call).
type Block struct {
	ReadID   uint64
	Lease    LeaseID
	Index    uint32
	Tokens   uint16
	Checksum uint64
	Digests  []uint64
	Data     []byte
}

// ReadEnd ends a Read (P→D): always the last message of a read. StatusOK
// means every requested Block was sent before it; any other status says why
// the read stopped early.
type ReadEnd struct {
	ReadID uint64
	Lease  LeaseID
	Status Status
}

// Release drops a lease (D→P). Idempotent: a second Release gets
// StatusReleased (StatusExpired when the lease had expired).
type Release struct {
	Lease  LeaseID
	Token  Token
	Reason Reason
}

// ReleaseAck answers a Release (P→D).
type ReleaseAck struct {
	Lease  LeaseID
	Status Status
}

// Revoked tells D that P dropped a lease this session had renewed or read
// (P→D).
type Revoked struct {
	Lease  LeaseID
	Reason Reason
}

func (*Hello) Type() MsgType      { return MsgHello }
func (*HelloAck) Type() MsgType   { return MsgHelloAck }
func (*Auth) Type() MsgType       { return MsgAuth }
func (*AuthAck) Type() MsgType    { return MsgAuthAck }
func (*Renew) Type() MsgType      { return MsgRenew }
func (*RenewAck) Type() MsgType   { return MsgRenewAck }
func (*Read) Type() MsgType       { return MsgRead }
func (*Block) Type() MsgType      { return MsgBlock }
func (*ReadEnd) Type() MsgType    { return MsgReadEnd }
func (*Release) Type() MsgType    { return MsgRelease }
func (*ReleaseAck) Type() MsgType { return MsgReleaseAck }
func (*Revoked) Type() MsgType    { return MsgRevoked }
