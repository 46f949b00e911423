package kvblock

// EventKind names a KV cache event, with vLLM's names.
type EventKind uint8

const (
	BlockStored EventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "EventKind(?)"
}

// Event is one entry of the pool's outbox, shaped like vLLM's KV events so an
// edge can publish it to a KV-cache indexer.
type Event struct {
	Kind EventKind
	// Hashes are the blocks stored or removed, in chain order for BlockStored.
	Hashes []Hash
	// Parent is the hash preceding Hashes[0] in its chain (RootHash for the
	// first block of a prompt); BlockStored only.
	Parent Hash
	// Tokens are the token ids of the stored blocks; BlockStored only.
	Tokens    []int32
	BlockSize int
	// Medium is where the blocks live: "GPU" for the primary pool, "CPU" or
	// "DISK" for offload tiers.
	Medium string
	// Adapter is the LoRA adapter the stored blocks were computed under
	// (the zero Adapter for the base model); BlockStored only.
	Adapter Adapter
}
