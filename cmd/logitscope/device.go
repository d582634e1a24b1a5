package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/checkpoint"
	"logitscope/cpu"
	"logitscope/gpu"
	"logitscope/gpu/native"
	"logitscope/gpuengine"
	"logitscope/model"
	"logitscope/session"
	"logitscope/variant"
)

// engine is one sequence on a device: the CPU reference or the GPU.
type engine interface {
	session.Engine
	Name() string // for receipts: "cpu", or "gpu: <adapter>"
	Close()
}

type cpuEngine struct{ *cpu.State }

func (cpuEngine) Name() string { return "cpu" }
func (cpuEngine) Close()       {}

type gpuEngine struct {
	*gpuengine.Engine
	dev  gpu.Device
	name string
}

func (g gpuEngine) Name() string { return g.name }
func (g gpuEngine) Close()       { g.Engine.Close(); g.dev.Close() }

// openVariant opens and verifies the variant in vdir ("" for f32: nil).
func openVariant(ck *checkpoint.Checkpoint, vdir, fp string) (*variant.Variant, error) {
	if vdir == "" {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(vdir, "manifest.json")); os.IsNotExist(err) {
		return nil, fmt.Errorf("no variant at %s: run logitscope quantize --model %s --scheme %s", vdir, ck.Dir, filepath.Base(vdir))
	}
	v, err := variant.Open(vdir)
	if err != nil {
		return nil, err
	}
	return v, v.CheckSource(fp)
}

// openEngine loads the checkpoint (v nil) or a variant of it on device
// (gpu, cpu, or auto: the GPU when an adapter exists), for sequences of up
// to capacity tokens. It says on stderr which device runs.
func openEngine(ck *checkpoint.Checkpoint, v *variant.Variant, device string, capacity int, stderr io.Writer) (engine, error) {
	switch device {
	case "cpu":
		return openCPU(ck, v, stderr, capacity)
	case "gpu", "auto":
		dev, err := native.Open()
		if err != nil {
			if device == "gpu" {
				return nil, err
			}
			fmt.Fprintf(stderr, "device: cpu (%v)\n", err)
			return openCPU(ck, v, stderr, capacity)
		}
		e, err := openGPU(dev, ck, v, capacity, stderr)
		if err != nil {
			dev.Close()
		}
		return e, err
	}
	return nil, fmt.Errorf("--device %q: want gpu, cpu or auto", device)
}

func openCPU(ck *checkpoint.Checkpoint, v *variant.Variant, stderr io.Writer, capacity int) (engine, error) {
	w := model.CheckpointWeights(ck)
	if v != nil {
		w = v
	}
	m, err := model.LoadWeights(ck, w, loadProgress(stderr))
	if err != nil {
		return nil, err
	}
	s, err := cpu.New(m, capacity)
	if err != nil {
		return nil, err
	}
	return cpuEngine{s}, nil
}

func openGPU(dev gpu.Device, ck *checkpoint.Checkpoint, v *variant.Variant, capacity int, stderr io.Writer) (engine, error) {
	info := dev.Info()
	name := fmt.Sprintf("gpu: %s (%s)", info.Adapter, info.Backend)
	fmt.Fprintf(stderr, "device: %s\n", name)
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ck.Dir, err)
	}
	src, w := gpuengine.CheckpointSource(ck), model.CheckpointWeights(ck)
	if v != nil {
		src, w = gpuengine.VariantSource(v), v
	}
	if err := model.Check(ck.Dir, g, w); err != nil {
		return nil, err
	}
	progress := func(done, total int64) {
		fmt.Fprintf(stderr, "\ruploading weights: %d/%d tensors", done, total)
		if done == total {
			fmt.Fprintln(stderr)
		}
	}
	e, err := gpuengine.New(dev, g, src, gpuengine.Options{Capacity: capacity, Progress: progress})
	if err != nil {
		return nil, err
	}
	return gpuEngine{Engine: e, dev: dev, name: name}, nil
}
