package native

import (
	"fmt"

	"github.com/gogpu/wgpu"

	"logitscope/internal/gpu"
)

// recorder holds the command encoder that Dispatch and CopyBuffer record
// into until Submit, and the compute pass that is open, if any.
//
// A run of consecutive dispatches shares one compute pass: gogpu's Vulkan
// backend puts a compute-to-compute memory barrier after every dispatch
// anyway, so a pass per dispatch only adds the pass's own barrier and
// bookkeeping. On lavapipe BenchmarkChain cannot tell the two apart (both
// about 45 µs per small dispatch), so the one with fewer barriers stays.
type recorder struct {
	enc             *wgpu.CommandEncoder
	pass            *wgpu.ComputePassEncoder
	passPerDispatch bool // for the benchmark's comparison only

	// doomed holds bind groups destroyed while recorded work still uses
	// them. gogpu refuses to submit a command buffer whose bind group was
	// released, while WebGPU bind groups are simply garbage collected, so
	// the release waits for the next Submit.
	doomed []*wgpu.BindGroup
}

func (r *recorder) releaseDoomed() {
	for _, bg := range r.doomed {
		bg.Release()
	}
	clear(r.doomed)
	r.doomed = r.doomed[:0]
}

// encoder returns the open encoder, outside any compute pass.
func (r *recorder) encoder(dev *wgpu.Device) (*wgpu.CommandEncoder, error) {
	if err := r.endPass(); err != nil {
		return nil, err
	}
	if r.enc == nil {
		enc, err := dev.CreateCommandEncoder(nil)
		if err != nil {
			return nil, fmt.Errorf("gpu/native: command encoder: %w", err)
		}
		r.enc = enc
	}
	return r.enc, nil
}

func (r *recorder) computePass(dev *wgpu.Device) (*wgpu.ComputePassEncoder, error) {
	if r.pass != nil {
		return r.pass, nil
	}
	enc, err := r.encoder(dev)
	if err != nil {
		return nil, err
	}
	pass, err := enc.BeginComputePass(nil)
	if err != nil {
		return nil, fmt.Errorf("gpu/native: compute pass: %w", err)
	}
	r.pass = pass
	return pass, nil
}

func (r *recorder) endPass() error {
	if r.pass == nil {
		return nil
	}
	pass := r.pass
	r.pass = nil
	if err := pass.End(); err != nil {
		return fmt.Errorf("gpu/native: end compute pass: %w", err)
	}
	return nil
}

// finish ends recording; nil when nothing was recorded.
func (r *recorder) finish() (*wgpu.CommandBuffer, error) {
	if r.enc == nil {
		return nil, nil
	}
	if err := r.endPass(); err != nil {
		r.discard()
		return nil, err
	}
	enc := r.enc
	r.enc = nil
	return enc.Finish()
}

func (r *recorder) discard() {
	if r.pass != nil {
		_ = r.pass.End()
		r.pass = nil
	}
	if r.enc != nil {
		r.enc.DiscardEncoding()
		r.enc = nil
	}
	r.releaseDoomed()
}

func (d *device) Dispatch(ph gpu.Pipeline, groups []gpu.BindGroup, x, y, z uint32) error {
	if d.closed {
		return errClosed
	}
	p, err := d.pipelines.get(uint32(ph))
	if err != nil {
		return fmt.Errorf("gpu/native: Dispatch: %w", err)
	}
	if len(groups) != len(p.groups) {
		return fmt.Errorf("gpu/native: Dispatch %q: %d bind groups given, the pipeline uses %d",
			p.label, len(groups), len(p.groups))
	}
	bgs := make([]*wgpu.BindGroup, len(groups))
	for i, h := range groups {
		g, err := d.groups.get(uint32(h))
		if err != nil {
			return fmt.Errorf("gpu/native: Dispatch %q: @group(%d): %w", p.label, i, err)
		}
		if g.pipeline != p || g.group != uint32(i) {
			return fmt.Errorf("gpu/native: Dispatch %q: @group(%d): bind group %d was made for pipeline %q group %d",
				p.label, i, h, g.pipeline.label, g.group)
		}
		bgs[i] = g.bg
	}
	if max := d.limits.MaxComputeWorkgroupsPerDimension; x > max || y > max || z > max {
		return fmt.Errorf("gpu/native: Dispatch %q: workgroups (%d, %d, %d) exceed the device's %d per dimension",
			p.label, x, y, z, max)
	}
	if x == 0 || y == 0 || z == 0 {
		return nil // an empty grid is a no-op in WebGPU too
	}
	pass, err := d.rec.computePass(d.dev)
	if err != nil {
		return err
	}
	pass.SetPipeline(p.cp)
	for i, bg := range bgs {
		pass.SetBindGroup(uint32(i), bg, nil)
	}
	pass.Dispatch(x, y, z)
	if d.rec.passPerDispatch {
		return d.rec.endPass()
	}
	return nil
}

// CopyBuffer records a buffer-to-buffer copy.
//
// gogpu v0.31.5 caveat: inside one command encoder it records no barrier
// between a copy and a later dispatch or copy that touches the same bytes
// (it tracks bind-group buffers of compute passes for nothing but
// validation; only compute passes end with a barrier). Lavapipe executes a
// command buffer strictly in order, so this cannot show there; on a real
// GPU a dispatch that reads a copy's destination in the same Submit could
// see stale data.
func (d *device) CopyBuffer(srcH gpu.Buffer, srcOffset int64, dstH gpu.Buffer, dstOffset int64, size int64) error {
	src, err := d.buffer(srcH)
	if err != nil {
		return fmt.Errorf("gpu/native: CopyBuffer source: %w", err)
	}
	dst, err := d.buffer(dstH)
	if err != nil {
		return fmt.Errorf("gpu/native: CopyBuffer destination: %w", err)
	}
	if srcOffset%4 != 0 || dstOffset%4 != 0 || size%4 != 0 {
		return fmt.Errorf("gpu/native: CopyBuffer %q -> %q: offsets %d, %d and size %d must be multiples of 4",
			src.label, dst.label, srcOffset, dstOffset, size)
	}
	if err := src.checkRange("CopyBuffer source", srcOffset, size); err != nil {
		return err
	}
	if err := dst.checkRange("CopyBuffer destination", dstOffset, size); err != nil {
		return err
	}
	if src == dst {
		return fmt.Errorf("gpu/native: CopyBuffer: source and destination are both buffer %q", src.label)
	}
	if size == 0 {
		return nil
	}
	enc, err := d.rec.encoder(d.dev)
	if err != nil {
		return err
	}
	enc.CopyBufferToBuffer(src.buf, uint64(srcOffset), dst.buf, uint64(dstOffset), uint64(size))
	return nil
}

// Submit sends what was recorded since the last Submit. gogpu defers
// encoding errors to Finish, so a rejected command surfaces here.
func (d *device) Submit() error {
	if d.closed {
		return errClosed
	}
	cb, err := d.rec.finish()
	defer d.rec.releaseDoomed()
	if err != nil {
		return fmt.Errorf("gpu/native: Submit: recorded commands rejected: %w", err)
	}
	if cb == nil {
		return nil
	}
	if _, err := d.queue.Submit(cb); err != nil {
		cb.Release()
		return fmt.Errorf("gpu/native: Submit: %w", err)
	}
	d.epoch++
	return nil
}
