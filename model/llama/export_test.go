package llama

// DecodePoolBytes makes e read keys and values from the pool's bytes one
// float at a time, as on a machine where it cannot view them as float32s
// in place: tests compare the two paths.
func DecodePoolBytes(e *Executor) { e.viewKV = false }
