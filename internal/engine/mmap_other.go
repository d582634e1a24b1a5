//go:build !unix

package engine

// mapFile maps nothing here: the weights' bytes are read.
func mapFile(path string) (data []byte, unmap func(), err error) { return nil, nil, nil }
