//go:build !unix

package llamafile

import "os"

// mapFile reads the whole file where memory-mapping is not available.
func mapFile(path string) ([]byte, func() error, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}

// mapAnon allocates n zeroed bytes where memory-mapping is not available.
func mapAnon(n int) ([]byte, func() error, error) {
	return make([]byte, n), func() error { return nil }, nil
}

// release: the file was read into memory the process keeps, so nothing
// is given back.
func release(data, b []byte) int { return 0 }
