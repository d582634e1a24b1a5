package native

import (
	"context"
	"fmt"

	"github.com/gogpu/wgpu"

	"logitscope/internal/gpu"
)

type buffer struct {
	label string
	buf   *wgpu.Buffer
	size  int64 // as created: the requested size rounded up to 4

	// writeEpoch is the submission that carries this buffer's last
	// WriteBuffer (gogpu sends pending writes with the next submission).
	writeEpoch uint64
}

func align4(n int64) int64 { return (n + 3) &^ 3 }

func (d *device) CreateBuffer(label string, size int64) (gpu.Buffer, error) {
	if d.closed {
		return 0, errClosed
	}
	if size <= 0 {
		return 0, fmt.Errorf("gpu/native: buffer %q: size %d must be positive", label, size)
	}
	// WebGPU wants buffer sizes in multiples of 4; kernels read whole words.
	rounded := align4(size)
	if max := int64(d.limits.MaxBufferSize); rounded > max {
		return 0, fmt.Errorf("gpu/native: buffer %q: %d bytes exceeds the device's maxBufferSize %d: split the tensor",
			label, size, max)
	}
	b, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{
		Label: label,
		Size:  uint64(rounded),
		Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageUniform | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst,
	})
	if err != nil {
		return 0, fmt.Errorf("gpu/native: buffer %q (%d bytes): %w", label, size, err)
	}
	h, err := d.buffers.add(&buffer{label: label, buf: b, size: rounded})
	if err != nil {
		b.Release()
		return 0, err
	}
	return gpu.Buffer(h), nil
}

func (d *device) buffer(h gpu.Buffer) (*buffer, error) {
	if d.closed {
		return nil, errClosed
	}
	return d.buffers.get(uint32(h))
}

// checkRange reports whether [off, off+n) lies inside b.
func (b *buffer) checkRange(what string, off, n int64) error {
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return fmt.Errorf("gpu/native: %s buffer %q: range [%d, %d) is outside its %d bytes",
			what, b.label, off, off+n, b.size)
	}
	return nil
}

// WriteBuffer requires 4-byte multiples, as WebGPU does: padding a short
// write here would clobber the bytes after it, and the browser build
// rejects it anyway.
func (d *device) WriteBuffer(h gpu.Buffer, offset int64, data []byte) error {
	b, err := d.buffer(h)
	if err != nil {
		return err
	}
	if err := b.checkRange("WriteBuffer:", offset, int64(len(data))); err != nil {
		return err
	}
	if offset%4 != 0 || len(data)%4 != 0 {
		return fmt.Errorf("gpu/native: WriteBuffer: buffer %q: offset %d and length %d must be multiples of 4",
			b.label, offset, len(data))
	}
	if len(data) == 0 {
		return nil
	}
	if err := d.queue.WriteBuffer(b.buf, uint64(offset), data); err != nil {
		return fmt.Errorf("gpu/native: WriteBuffer: buffer %q: %w", b.label, err)
	}
	b.writeEpoch = d.epoch + 1
	return nil
}

// DestroyBuffer releases b. gogpu keeps a buffer alive while submitted
// dispatches and copies use it, but not while its own pending writes do:
// releasing a buffer whose WriteBuffer has not finished on the GPU lets the
// write land in freed memory (a segfault on lavapipe, gogpu v0.31.5). Such
// a buffer is released only after a ReadBuffer has waited for the GPU.
func (d *device) DestroyBuffer(h gpu.Buffer) {
	if d.closed {
		return
	}
	b, ok := d.buffers.remove(uint32(h))
	if !ok {
		return
	}
	if b.writeEpoch > d.doneEpoch {
		d.doomed = append(d.doomed, b.buf)
		return
	}
	b.buf.Release()
}

// gpuIdle notes that every submission so far has completed.
func (d *device) gpuIdle() {
	d.doneEpoch = d.epoch
	for _, b := range d.doomed {
		b.Release()
	}
	clear(d.doomed)
	d.doomed = d.doomed[:0]
}

// ReadBuffer submits what is recorded together with a copy of the
// requested words into the staging buffer, then maps it. Offset and size
// need not be multiples of 4: the copy is widened to whole words.
func (d *device) ReadBuffer(h gpu.Buffer, offset, size int64) ([]byte, error) {
	b, err := d.buffer(h)
	if err != nil {
		return nil, err
	}
	if err := b.checkRange("ReadBuffer:", offset, size); err != nil {
		return nil, err
	}
	out := make([]byte, size)
	if size == 0 {
		return out, d.Submit()
	}
	start := offset &^ 3
	n := align4(offset+size) - start
	staging, err := d.stagingFor(n)
	if err != nil {
		return nil, err
	}
	enc, err := d.rec.encoder(d.dev)
	if err != nil {
		return nil, err
	}
	enc.CopyBufferToBuffer(b.buf, uint64(start), staging, 0, uint64(n))
	if err := d.Submit(); err != nil {
		return nil, err
	}
	// Map waits for the submission; there is no deadline because a large
	// prefill on a CPU Vulkan driver can legitimately take long.
	if err := staging.Map(context.Background(), wgpu.MapModeRead, 0, uint64(n)); err != nil {
		return nil, fmt.Errorf("gpu/native: ReadBuffer: buffer %q: map: %w", b.label, err)
	}
	defer staging.Unmap()
	d.gpuIdle() // the copy was submitted last, so everything before is done too
	r, err := staging.MappedRange(0, uint64(n))
	if err != nil {
		return nil, fmt.Errorf("gpu/native: ReadBuffer: buffer %q: %w", b.label, err)
	}
	copy(out, r.Bytes()[offset-start:])
	return out, nil
}

// stagingFor returns the staging buffer, grown to hold n bytes. It grows
// to at least 1 MiB and by doubling so that a run of reads of rising size
// does not reallocate every time.
func (d *device) stagingFor(n int64) (*wgpu.Buffer, error) {
	if d.staging != nil && int64(d.staging.Size()) >= n {
		return d.staging, nil
	}
	size := int64(1 << 20)
	if d.staging != nil {
		size = 2 * int64(d.staging.Size())
	}
	for size < n {
		size *= 2
	}
	if max := int64(d.limits.MaxBufferSize); size > max {
		size = max
	}
	s, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{
		Label: "readback staging",
		Size:  uint64(size),
		Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst,
	})
	if err != nil {
		return nil, fmt.Errorf("gpu/native: ReadBuffer: staging buffer of %d bytes: %w", size, err)
	}
	if d.staging != nil {
		d.staging.Release()
	}
	d.staging = s
	return s, nil
}
