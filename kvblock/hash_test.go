package kvblock

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"
)

func randTokens(rng *rand.Rand, n, alphabet int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(rng.IntN(alphabet))
	}
	return t
}

// TestSipHashVectors pins sipHash128 to the reference vectors of SipHash-2-4
// with a 128-bit output (vectors_sip128 of the reference implementation:
// key 00 01 … 0f, message 00 01 … len-1), covering an empty message, a
// partial last word, exactly one word and a word plus seven bytes.
func TestSipHashVectors(t *testing.T) {
	var key HashKey
	for i := range key {
		key[i] = byte(i)
	}
	tests := []struct {
		len  int
		want string
	}{
		{0, "a3817f04ba25a8e66df67214c7550293"},
		{1, "da87c1d86b99af44347659119b22fc45"},
		{2, "8177228da4a45dc7fca38bdef60affe4"},
		{8, "3b62a9ba6258f5610f83e264f31497b4"},
		{15, "5493e99933b0a8117e08ec0f97cfc3d9"},
	}
	for _, tt := range tests {
		msg := make([]byte, tt.len)
		for i := range msg {
			msg[i] = byte(i)
		}
		if got := sipHash128(key, msg); hex.EncodeToString(got[:]) != tt.want {
			t.Errorf("SipHash-2-4-128 of %d bytes = %x, want %s", tt.len, got, tt.want)
		}
	}
}

// TestHashGolden pins the hash function: every engine and offload tier must
// compute the same hashes for the same tokens and key, so a change here is
// a storage and event format change, not a refactor.
func TestHashGolden(t *testing.T) {
	tokens := make([]int32, 32)
	for i := range tokens {
		tokens[i] = int32(i * 7)
	}
	key := DeriveHashKey([]byte("kvlease golden secret, 32 bytes!"))
	if got := hex.EncodeToString(key[:]); got != "bf82344464acc926d1550dcc1542e2c4" {
		t.Errorf("DeriveHashKey = %s, want bf82344464acc926d1550dcc1542e2c4", got)
	}
	tests := []struct {
		ex   Extras
		want []string
	}{
		{Extras{}, []string{"a0f7d92fe73354402df0dcb9f0493e0d", "a85c0b1ce0a5ffd1b6b793e60f5eb30d"}},
		{Extras{Key: key}, []string{"afb1653fa4de713d81fb6e7fb1409d56", "150a9d0c1adba2cb87be884cc7bea81e"}},
		{Extras{Key: key, CacheSalt: "s"}, []string{"a0b117c197ce48e79e8e833f265052e0", "29855387d492f4bdc442ab6e1efa404c"}},
		{Extras{Key: key, Adapter: Adapter{Name: "a"}}, []string{"75c16f437a2e0cd83069cc7933190a35", "209d3ae77d9275a05d1fdc4d48781108"}},
		{Extras{Key: key, CacheSalt: "s", Adapter: Adapter{Name: "a"}}, []string{"37bf461903fb3be2679bd9bd670a6aba", "50f6e5fdcf0b4f1ec87c05585ac5fafe"}},
	}
	for _, tt := range tests {
		got := AppendHashes(nil, tokens, 16, tt.ex)
		var gotHex []string
		for _, h := range got {
			gotHex = append(gotHex, hex.EncodeToString(h[:]))
		}
		if !slices.Equal(gotHex, tt.want) {
			t.Errorf("AppendHashes(salt %q adapter %q key %x) = %q, want %q", tt.ex.CacheSalt, tt.ex.Adapter.Name, tt.ex.Key, gotHex, tt.want)
		}
	}
	// The layout, spelled out independently: SipHash-2-4-128 of the parent
	// and the token ids, little endian, then 0xff and the extra key if any.
	spell := func(parent Hash, toks []int32, extra string) Hash {
		buf := append([]byte(nil), parent[:]...)
		for _, tok := range toks {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(tok))
		}
		if extra != "" {
			buf = append(append(buf, 0xff), extra...)
		}
		return sipHash128(key, buf)
	}
	for _, extra := range []string{"", "adapter:a"} {
		if got, want := HashBlock(key, RootHash, tokens[:16], extra), spell(RootHash, tokens[:16], extra); got != want {
			t.Errorf("HashBlock(extra %q) = %x, the documented layout gives %x", extra, got, want)
		}
	}
}

// TestHashKeyed: the key changes every hash, so hashes (and collisions)
// cannot be computed without it; DeriveHashKey depends on every byte of the
// secret.
func TestHashKeyed(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	tokens := randTokens(rng, 64, 1000)
	k1 := DeriveHashKey([]byte("secret one, long enough to pass"))
	k2 := DeriveHashKey([]byte("secret one, long enough to pasS"))
	if k1 == k2 || k1 == (HashKey{}) {
		t.Fatalf("DeriveHashKey: %x and %x", k1, k2)
	}
	a := AppendHashes(nil, tokens, 16, Extras{Key: k1})
	b := AppendHashes(nil, tokens, 16, Extras{Key: k2})
	again := AppendHashes(nil, tokens, 16, Extras{Key: k1})
	if !slices.Equal(a, again) {
		t.Fatal("the same key and tokens gave different hashes")
	}
	for i := range a {
		if a[i] == b[i] {
			t.Fatalf("block %d hashes alike under two keys", i)
		}
	}
}

// TestAppendHashesIncremental: extending the hashes token by token, or in
// random steps, gives exactly the one-shot result.
func TestAppendHashesIncremental(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bs := range []int{1, 3, 16, 100} { // 100: longer than HashBlock's stack buffer
		for _, ex := range []Extras{{}, {CacheSalt: "salt"}, {Adapter: Adapter{Name: "lora"}}, {CacheSalt: "salt", Adapter: Adapter{Name: "lora"}}} {
			tokens := randTokens(rng, 10*bs+bs/2, 5)
			oneShot := AppendHashes(nil, tokens, bs, ex)
			if len(oneShot) != 10 {
				t.Fatalf("bs %d: %d hashes, want 10", bs, len(oneShot))
			}
			var inc []Hash
			for n := 0; n <= len(tokens); n++ {
				inc = AppendHashes(inc, tokens[:n], bs, ex)
				if len(inc) != n/bs {
					t.Fatalf("bs %d after %d tokens: %d hashes, want %d", bs, n, len(inc), n/bs)
				}
			}
			if !slices.Equal(inc, oneShot) {
				t.Fatalf("bs %d %+v: token by token %x, one shot %x", bs, ex, inc, oneShot)
			}
			var steps []Hash
			for n := 0; n < len(tokens); {
				n = min(len(tokens), n+rng.IntN(3*bs))
				steps = AppendHashes(steps, tokens[:n], bs, ex)
			}
			if !slices.Equal(steps, oneShot) {
				t.Fatalf("bs %d %+v: in random steps %x, one shot %x", bs, ex, steps, oneShot)
			}
			// The chain, spelled out.
			parent := RootHash
			for i, h := range oneShot {
				if want := HashBlock(ex.Key, parent, tokens[i*bs:(i+1)*bs], ex.forBlock(i)); h != want {
					t.Fatalf("bs %d block %d: %x, HashBlock gives %x", bs, i, h, want)
				}
				parent = h
			}
		}
	}
}

// TestPartialBlocksNotHashed: only full blocks get a hash, and the tokens of
// a partial block do not affect the hashes before it.
func TestPartialBlocksNotHashed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tokens := randTokens(rng, 47, 100)
	if got := AppendHashes(nil, tokens[:15], 16, Extras{}); len(got) != 0 {
		t.Fatalf("15 tokens gave %d hashes", len(got))
	}
	full := AppendHashes(nil, tokens[:32], 16, Extras{})
	partial := AppendHashes(nil, tokens, 16, Extras{})
	if !slices.Equal(full, partial) {
		t.Fatalf("47 tokens: %x, want the 2 hashes of the first 32 tokens %x", partial, full)
	}
	tokens[40]++
	if again := AppendHashes(nil, tokens, 16, Extras{}); !slices.Equal(again, full) {
		t.Fatal("a token of the partial block changed the hashes")
	}
	// dst already longer than the full blocks: nothing to add.
	if got := AppendHashes(full[:2:2], tokens[:20], 16, Extras{}); len(got) != 2 {
		t.Fatalf("AppendHashes shrank or grew dst: %d hashes", len(got))
	}
}

// TestExtrasScope: the cache salt enters only block 0 (so, through the
// chain, every hash differs, but blocks after 0 hash exactly as without a
// salt given their parent); the adapter enters every block.
func TestExtrasScope(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const bs = 16
	tokens := randTokens(rng, 6*bs, 1000)
	plain := AppendHashes(nil, tokens, bs, Extras{})
	salted := AppendHashes(nil, tokens, bs, Extras{CacheSalt: "tenant-a"})
	salted2 := AppendHashes(nil, tokens, bs, Extras{CacheSalt: "tenant-b"})
	adapted := AppendHashes(nil, tokens, bs, Extras{Adapter: Adapter{Name: "lora-1"}})
	both := AppendHashes(nil, tokens, bs, Extras{CacheSalt: "tenant-a", Adapter: Adapter{Name: "lora-1"}})
	for i := range plain {
		seen := map[Hash]string{}
		for name, hs := range map[string][]Hash{"plain": plain, "salted": salted, "salted2": salted2, "adapted": adapted, "both": both} {
			if other, dup := seen[hs[i]]; dup {
				t.Fatalf("block %d: %s and %s hash alike", i, name, other)
			}
			seen[hs[i]] = name
		}
	}
	for i := 1; i < len(plain); i++ {
		tok := tokens[i*bs : (i+1)*bs]
		if want := HashBlock(HashKey{}, salted[i-1], tok, ""); salted[i] != want {
			t.Fatalf("salted block %d mixes in more than its parent and tokens", i)
		}
		if want := HashBlock(HashKey{}, adapted[i-1], tok, ""); adapted[i] == want {
			t.Fatalf("adapter block %d does not mix in the adapter", i)
		}
		if want := HashBlock(HashKey{}, both[i-1], tok, "adapter:lora-1"); both[i] != want {
			t.Fatalf("salt+adapter block %d: salt leaks past block 0", i)
		}
	}
	// A salt and an adapter with the same name are different keys.
	if a, b := AppendHashes(nil, tokens[:bs], bs, Extras{CacheSalt: "x"}), AppendHashes(nil, tokens[:bs], bs, Extras{Adapter: Adapter{Name: "x"}}); a[0] == b[0] {
		t.Fatal("salt x and adapter x hash alike")
	}
}

// TestHashOrderMatters: reordering tokens inside a block, or swapping whole
// blocks, changes the hash of that block and of everything after it, and
// nothing before it.
func TestHashOrderMatters(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const bs = 4
	tokens := randTokens(rng, 5*bs, 1_000_000)
	base := AppendHashes(nil, tokens, bs, Extras{})

	swapped := slices.Clone(tokens)
	swapped[2*bs], swapped[2*bs+1] = swapped[2*bs+1], swapped[2*bs]
	got := AppendHashes(nil, swapped, bs, Extras{})
	for i := range base {
		if (got[i] == base[i]) != (i < 2) {
			t.Fatalf("tokens swapped in block 2: block %d hash equal = %v", i, got[i] == base[i])
		}
	}

	blocksSwapped := slices.Concat(tokens[bs:2*bs], tokens[:bs], tokens[2*bs:])
	got = AppendHashes(nil, blocksSwapped, bs, Extras{})
	for i := range base {
		if got[i] == base[i] {
			t.Fatalf("blocks 0 and 1 swapped: block %d hash unchanged", i)
		}
	}
	// Same tokens at another position (another parent): another hash.
	same := slices.Repeat(tokens[:bs], 3)
	hs := AppendHashes(nil, same, bs, Extras{})
	if hs[0] == hs[1] || hs[1] == hs[2] {
		t.Fatal("a repeated block hashes alike at different positions")
	}
	// Token ids are hashed as 32-bit values, not bytes.
	if HashBlock(HashKey{}, RootHash, []int32{1, 256}, "") == HashBlock(HashKey{}, RootHash, []int32{256, 1}, "") ||
		HashBlock(HashKey{}, RootHash, []int32{-1}, "") == HashBlock(HashKey{}, RootHash, []int32{1}, "") {
		t.Fatal("distinct token sequences hash alike")
	}
}

// TestAdapterIdentity: an adapter's weights digest is part of the key (the
// same name loaded again with other weights never hits the first one's
// blocks); its per-engine ID is not (engines number adapters
// independently).
func TestAdapterIdentity(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const bs = 16
	tokens := randTokens(rng, 3*bs, 1000)
	a := AppendHashes(nil, tokens, bs, Extras{Adapter: Adapter{Name: "sql", ID: 1, Digest: 42}})
	renumbered := AppendHashes(nil, tokens, bs, Extras{Adapter: Adapter{Name: "sql", ID: 7, Digest: 42}})
	reloaded := AppendHashes(nil, tokens, bs, Extras{Adapter: Adapter{Name: "sql", ID: 1, Digest: 43}})
	nameOnly := AppendHashes(nil, tokens, bs, Extras{Adapter: Adapter{Name: "sql"}})
	if !slices.Equal(a, renumbered) {
		t.Fatal("the adapter's ID changed its hashes")
	}
	for i := range a {
		if a[i] == reloaded[i] || a[i] == nameOnly[i] {
			t.Fatalf("block %d: another digest hashes alike", i)
		}
	}
	if (Adapter{Name: "x"}).IsBase() || !(Adapter{}).IsBase() {
		t.Fatal("IsBase")
	}
}

func TestChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	d := make([]uint64, 100)
	for i := range d {
		d[i] = rng.Uint64()
	}
	c := Checksum(d)
	if c != Checksum(slices.Clone(d)) {
		t.Fatal("not deterministic")
	}
	for i := range d {
		e := slices.Clone(d)
		e[i] ^= 1 << (i % 64)
		if Checksum(e) == c {
			t.Fatalf("flipping a bit of digest %d does not change the checksum", i)
		}
	}
	if Checksum(d[:99]) == c || Checksum(nil) == c {
		t.Fatal("length does not matter")
	}
	if a := testing.AllocsPerRun(10, func() { Checksum(d) }); a != 0 {
		t.Fatalf("Checksum allocates %v", a)
	}
	// The wire format: xxhash64 of the digests as little-endian bytes.
	raw := make([]byte, 0, 24)
	for _, v := range d[:3] {
		for k := 0; k < 8; k++ {
			raw = append(raw, byte(v>>(8*k)))
		}
	}
	if Checksum(d[:3]) != SlotDigest(raw) {
		t.Fatal("Checksum is not xxhash64 of little-endian digests")
	}
}

func BenchmarkChecksum(b *testing.B) {
	d := make([]uint64, 16)
	b.SetBytes(16 * 8)
	b.ReportAllocs()
	for b.Loop() {
		Checksum(d)
	}
}
