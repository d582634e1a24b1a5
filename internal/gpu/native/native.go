// Package native implements gpu.Device on github.com/gogpu/wgpu's Vulkan
// backend, pure Go (CGO_ENABLED=0 works: the Vulkan loader is opened at run
// time). On machines without a GPU, Mesa's lavapipe is the Vulkan driver.
//
// Only Vulkan is used: gogpu/wgpu's Software backend gets barriers,
// workgroup memory, atomics and the packed-int8 built-ins wrong, and its
// GLES backend fails on runtime-sized arrays (see /work/shared/DESIGN.md).
package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gogpu/gputypes"
	"github.com/gogpu/wgpu"
	_ "github.com/gogpu/wgpu/hal/vulkan" // registers the only backend we accept

	"logitscope/internal/gpu"
)

// ErrNoAdapter is wrapped by Open's error when no Vulkan device exists.
var ErrNoAdapter = errors.New("no WebGPU adapter: install Mesa's Vulkan drivers (apt-get install mesa-vulkan-drivers libvulkan1) or use --device cpu")

type device struct {
	instance *wgpu.Instance
	adapter  *wgpu.Adapter
	dev      *wgpu.Device
	queue    *wgpu.Queue
	info     gpu.Info
	limits   wgpu.Limits

	buffers   table[*buffer]
	modules   table[*module]
	pipelines table[*pipeline]
	groups    table[*bindGroup]

	rec       recorder
	staging   *wgpu.Buffer   // MapRead buffer reused by every ReadBuffer
	epoch     uint64         // successful queue submissions so far
	doneEpoch uint64         // submissions known to have completed
	doomed    []*wgpu.Buffer // destroyed, released once the GPU is idle
	closed    bool
}

// Open opens the high-performance Vulkan adapter with its own limits.
func Open() (gpu.Device, error) {
	runtimeDir()
	inst, err := wgpu.CreateInstance(&wgpu.InstanceDescriptor{Backends: wgpu.BackendsVulkan})
	if err != nil {
		return nil, fmt.Errorf("gpu/native: %w", err)
	}
	d := &device{
		instance:  inst,
		buffers:   newTable[*buffer]("buffer"),
		modules:   newTable[*module]("shader module"),
		pipelines: newTable[*pipeline]("pipeline"),
		groups:    newTable[*bindGroup]("bind group"),
	}
	if err := d.open(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *device) open() error {
	ad, err := d.instance.RequestAdapter(&wgpu.RequestAdapterOptions{
		PowerPreference: gputypes.PowerPreferenceHighPerformance,
	})
	if err != nil {
		// gogpu says only "no adapters available"; say what to do about it.
		return fmt.Errorf("gpu/native: %w (%v)", ErrNoAdapter, err)
	}
	d.adapter = ad
	info := ad.Info()
	// Instance creation is restricted to Vulkan, so this only guards against
	// a future gogpu that falls back to its Software backend regardless.
	if info.Backend != gputypes.BackendVulkan {
		return fmt.Errorf("gpu/native: adapter %q uses backend %v; only Vulkan gives correct results: %w",
			info.Name, info.Backend, ErrNoAdapter)
	}
	lim := ad.Limits()
	if err := checkDefaults(lim); err != nil {
		return fmt.Errorf("gpu/native: adapter %q: %w", info.Name, err)
	}

	want := gputypes.Features(0)
	for _, f := range []gputypes.Feature{gputypes.FeatureSubgroupOperations, gputypes.FeatureSubgroupBarrier} {
		if ad.Features().Contains(f) {
			want |= gputypes.Features(f)
		}
	}
	d.dev, err = ad.RequestDevice(&wgpu.DeviceDescriptor{
		Label:            "logitscope",
		RequiredFeatures: want,
		RequiredLimits:   lim,
	})
	if err != nil {
		return fmt.Errorf("gpu/native: adapter %q: request device: %w", info.Name, err)
	}
	d.queue = d.dev.Queue()
	d.limits = d.dev.Limits()
	d.info = gpu.Info{
		Adapter:  info.Name,
		Backend:  "vulkan",
		Software: info.DeviceType == gputypes.DeviceTypeCPU,
		Limits: gpu.Limits{
			MaxStorageBufferBindingSize:       int64(d.limits.MaxStorageBufferBindingSize),
			MaxBufferSize:                     int64(d.limits.MaxBufferSize),
			MaxComputeWorkgroupsPerDimension:  d.limits.MaxComputeWorkgroupsPerDimension,
			MaxComputeInvocationsPerWorkgroup: d.limits.MaxComputeInvocationsPerWorkgroup,
			MaxComputeWorkgroupSizeX:          d.limits.MaxComputeWorkgroupSizeX,
			MaxStorageBuffersPerShaderStage:   d.limits.MaxStorageBuffersPerShaderStage,
			MinStorageBufferOffsetAlignment:   d.limits.MinStorageBufferOffsetAlignment,
			MinUniformBufferOffsetAlignment:   d.limits.MinUniformBufferOffsetAlignment,
		},
	}
	// gogpu's Vulkan adapter does not advertise the subgroups feature even
	// where the driver has it (lavapipe), yet naga compiles subgroup
	// built-ins and they run; so ask the device itself, which also tells
	// the size (Vulkan's compute subgroups have one size per device unless
	// a pipeline asks otherwise, which gogpu's never does).
	if size, err := d.subgroupSize(); err == nil {
		d.info.Subgroups, d.info.SubgroupMinSize = true, size
	}
	return nil
}

// checkDefaults refuses adapters below WebGPU's default limits, which the
// engine's kernels and tensor splits are planned against.
func checkDefaults(l wgpu.Limits) error {
	def := gputypes.DefaultLimits()
	type check struct {
		name      string
		have, min uint64
	}
	for _, c := range []check{
		{"maxStorageBufferBindingSize", l.MaxStorageBufferBindingSize, def.MaxStorageBufferBindingSize},
		{"maxBufferSize", l.MaxBufferSize, def.MaxBufferSize},
		{"maxComputeWorkgroupsPerDimension", uint64(l.MaxComputeWorkgroupsPerDimension), uint64(def.MaxComputeWorkgroupsPerDimension)},
		{"maxComputeInvocationsPerWorkgroup", uint64(l.MaxComputeInvocationsPerWorkgroup), uint64(def.MaxComputeInvocationsPerWorkgroup)},
		{"maxComputeWorkgroupSizeX", uint64(l.MaxComputeWorkgroupSizeX), uint64(def.MaxComputeWorkgroupSizeX)},
		{"maxStorageBuffersPerShaderStage", uint64(l.MaxStorageBuffersPerShaderStage), uint64(def.MaxStorageBuffersPerShaderStage)},
		{"maxComputeWorkgroupStorageSize", uint64(l.MaxComputeWorkgroupStorageSize), uint64(def.MaxComputeWorkgroupStorageSize)},
	} {
		if c.have < c.min {
			return fmt.Errorf("%s is %d, below WebGPU's default %d", c.name, c.have, c.min)
		}
	}
	// Alignments are limits where smaller is better.
	if l.MinStorageBufferOffsetAlignment > def.MinStorageBufferOffsetAlignment {
		return fmt.Errorf("minStorageBufferOffsetAlignment is %d, above WebGPU's default %d",
			l.MinStorageBufferOffsetAlignment, def.MinStorageBufferOffsetAlignment)
	}
	if l.MinUniformBufferOffsetAlignment > def.MinUniformBufferOffsetAlignment {
		return fmt.Errorf("minUniformBufferOffsetAlignment is %d, above WebGPU's default %d",
			l.MinUniformBufferOffsetAlignment, def.MinUniformBufferOffsetAlignment)
	}
	return nil
}

func (d *device) Info() gpu.Info { return d.info }

var (
	errClosed         = errors.New("gpu/native: device is closed")
	errSubgroupsWrong = errors.New("gpu/native: subgroup built-ins give wrong results")
)

// destroyModule and destroyPipeline exist for internal probes: package gpu
// has no such methods because the engine keeps its kernels for the
// device's lifetime.
func (d *device) destroyModule(h gpu.Module) {
	if m, ok := d.modules.remove(uint32(h)); ok {
		m.sm.Release()
	}
}

func (d *device) destroyPipeline(h gpu.Pipeline) {
	if p, ok := d.pipelines.remove(uint32(h)); ok {
		p.release()
	}
}

// Close releases every object the device still holds, then the device.
func (d *device) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	d.rec.discard()
	for _, g := range d.groups.items {
		g.bg.Release()
	}
	for _, p := range d.pipelines.items {
		p.release()
	}
	for _, m := range d.modules.items {
		m.sm.Release()
	}
	for _, b := range d.buffers.items {
		b.buf.Release()
	}
	clear(d.groups.items)
	clear(d.pipelines.items)
	clear(d.modules.items)
	clear(d.buffers.items)
	for _, b := range d.doomed {
		b.Release()
	}
	d.doomed = nil
	if d.staging != nil {
		d.staging.Release()
		d.staging = nil
	}
	if d.dev != nil {
		d.dev.Release()
	}
	if d.adapter != nil {
		d.adapter.Release()
	}
	if d.instance != nil {
		d.instance.Release()
	}
	return nil
}

// runtimeDir gives the process an XDG_RUNTIME_DIR when it has none (a
// shell without a login session, a container, CI): Mesa's Vulkan
// complains on every device open without one ("error: XDG_RUNTIME_DIR is
// invalid or not set"), four lines a capture, on a success.
func runtimeDir() {
	if os.Getenv("XDG_RUNTIME_DIR") != "" {
		return
	}
	// One per user, private, as the spec wants it: every process reuses it.
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("logitscope-xdg-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	if st, err := os.Stat(dir); err == nil && st.IsDir() && st.Mode().Perm() == 0o700 {
		os.Setenv("XDG_RUNTIME_DIR", dir)
	}
}
