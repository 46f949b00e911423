package bpe

// byteToUnicode is GPT-2's map of bytes to printable characters: the
// printable Latin-1 bytes map to themselves, the others to U+0100 onwards,
// in byte order.
var byteToUnicode, unicodeToByte = func() ([256]rune, map[rune]byte) {
	var fwd [256]rune
	inv := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			fwd[b] = rune(b)
		} else {
			fwd[b] = rune(256 + n)
			n++
		}
		inv[fwd[b]] = byte(b)
	}
	return fwd, inv
}()
