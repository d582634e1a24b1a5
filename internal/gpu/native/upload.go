package native

import (
	"fmt"
	"os"

	"logitscope/internal/gpu"
)

// UploadFile reads a file region and queues it into a buffer: weights go
// from a shard to the device without the caller holding the whole tensor.
func (d *device) UploadFile(h gpu.Buffer, offset int64, path string, fileOffset, length int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("gpu/native: UploadFile: %w", err)
	}
	defer f.Close()
	data := make([]byte, (length+3)/4*4)
	if _, err := f.ReadAt(data[:length], fileOffset); err != nil {
		return fmt.Errorf("gpu/native: UploadFile: %s: reading %d bytes at %d: %w", path, length, fileOffset, err)
	}
	return d.WriteBuffer(h, offset, data)
}

var _ gpu.FileUploader = (*device)(nil)
