//go:build !amd64

package llama

// quantQ8Vec: no vector rounding here; quantQ8 does every block.
func quantQ8Vec(x *float32, nb int, q *int8, d, s *float32, ob *int32) int { return 0 }

// quantQ8KVec: no vector rounding here; quantQ8K does every super-block.
func quantQ8KVec(x *float32, nb int, q *int8, d *float32) int { return 0 }
