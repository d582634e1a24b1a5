package engine

import (
	"errors"
	"fmt"

	"logitscope/internal/engine/internal/cpu"
	"logitscope/internal/engine/internal/gpuengine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/model"
)

// Mix holds two sets of one model's weights on the CPU, each loaded once:
// the reference (the checkpoint's own) and a test (a variant's or a GGUF
// file's). Run runs the reference's forward pass (package cpu, the same
// code as every capture) with the matrices a Choice names taken from the
// test or replaced, starting at any layer: the sweeps and attributions of
// package sensitivity. With a device (OpenMix's opt.Device) Run runs the
// WGSL program instead (package gpuengine, as a GPU capture does), built
// for each run from both sets' files, whole windows only.
type Mix struct {
	g         model.Geometry
	ref, test map[string]*model.Matrix
	st        *cpu.State
	acts8     bool
	release   []func()

	dev             gpu.Device
	refSrc, testSrc gpuengine.Source
	pipes           map[string]gpu.Pipeline // compiled once for every run's program
	wg              int                     // the matmul workgroup size the first run chose, kept (every size gives the same bits)
}

// Matrix is a matrix a Mix's test stores otherwise than as float32: a
// unit a sweep can quantize or restore.
type Matrix struct {
	Name   string
	Format string // the test's format: q4, Q4_K, F16, …; several joined by "+"
	Rows   int
	Cols   int
	Bytes  int64 // the test's stored size
}

// OpenMix loads the checkpoint's weights and opt's test weights
// (opt.Variant or opt.GGUF, one of them) on the CPU, each checked against
// the checkpoint's geometry as Open checks them; opt.Progress is told the
// bytes read of each, as unit "reference" and "test". With opt.Device,
// runs go to the device (Run), and the CPU's sets serve Changed and Float.
func OpenMix(ck *checkpoint.Checkpoint, opt Options) (*Mix, error) {
	switch {
	case (opt.Variant == nil) == (opt.GGUF == nil):
		return nil, errors.New("engine: a mix needs test weights: a variant or a GGUF file")
	case ck.GGUF != "":
		return nil, fmt.Errorf("%s is a GGUF file: a mix's reference is a Hugging Face checkpoint", ck.GGUF)
	case opt.Quantized != nil || lookupActs(opt.Activations):
		// Its reference would be the float checkpoint it was quantized
		// from, which the quantized checkpoint does not name.
		return nil, fmt.Errorf("engine: a mix of a hub quantization's weights (%s activations %q) is not supported", ck.Dir, opt.Activations)
	}
	if err := CheckActivations(opt.Activations); err != nil {
		return nil, err
	}
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ck.Dir, err)
	}
	x := &Mix{g: g, acts8: opt.Activations == ActsQ8, dev: opt.Device, pipes: map[string]gpu.Pipeline{}}
	refSrc, refW := Options{}.weights(ck)
	if err := model.Check(ck.Dir, g, refW); err != nil {
		return nil, err
	}
	ref, release, err := loadTensors(g, refSrc, refW, opt.Files, opt.progress("reference"))
	if err != nil {
		return nil, err
	}
	x.ref, x.release = ref, append(x.release, release)
	src, w := opt.weights(ck)
	if err := model.Check(ck.Dir, g, w); err != nil {
		x.Close()
		return nil, err
	}
	test, release, err := loadTensors(g, src, w, opt.Files, opt.progress("test"))
	if err != nil {
		x.Close()
		return nil, err
	}
	x.test, x.release = test, append(x.release, release)
	x.refSrc, x.testSrc = refSrc, src
	return x, nil
}

// Device names where the runs run: "cpu", or "gpu: <adapter> (<backend>)".
func (x *Mix) Device() string { return DeviceName(x.dev) }

// Boundaries says whether Run starts at a layer and reports the residual
// stream leaving each: on the CPU only.
func (x *Mix) Boundaries() bool { return x.dev == nil }

// Geometry is the model's.
func (x *Mix) Geometry() model.Geometry { return x.g }

// Close frees both sets of weights.
func (x *Mix) Close() {
	for _, r := range x.release {
		r()
	}
	x.release, x.ref, x.test, x.st = nil, nil, nil, nil
}

// Changed lists the matrices the test stores otherwise than as float32,
// in load order.
func (x *Mix) Changed() []Matrix {
	var out []Matrix
	for _, s := range x.g.Specs() {
		t := x.test[s.Name]
		if len(s.Shape) != 2 || t == nil || t.Data != nil {
			continue
		}
		m := Matrix{Name: s.Name, Rows: t.Rows, Cols: t.Cols}
		seen := map[string]bool{}
		for _, p := range t.Pieces {
			if f := p.Format.String(); !seen[f] {
				seen[f] = true
				if m.Format != "" {
					m.Format += "+"
				}
				m.Format += f
			}
			m.Bytes += int64(len(p.Data))
		}
		out = append(out, m)
	}
	return out
}

// Matrices lists every matrix of the model, in load order.
func (x *Mix) Matrices() []string {
	var out []string
	for _, s := range x.g.Specs() {
		if len(s.Shape) == 2 {
			out = append(out, s.Name)
		}
	}
	return out
}

// Float returns a matrix's reference and test weights as float32 (rows,
// cols), row-major, decoded as the products decode them.
func (x *Mix) Float(name string) (ref, test []float32, err error) {
	r, t := x.ref[name], x.test[name]
	if r == nil || t == nil || r.Cols == 1 {
		return nil, nil, fmt.Errorf("engine: no matrix %s", name)
	}
	return cpu.Decode(r), cpu.Decode(t), nil
}

// Choice says which weights a run takes for each matrix: Over's float32
// (row-major, the matrix's shape) where it holds the name, else the
// test's where Test says so, else the reference's.
type Choice struct {
	Test func(name string) bool
	Over map[string][]float32
}

// Run runs tokens as one teacher-forced window of the model c chooses,
// from layer from on x (T,d), the residual stream entering it (nil: the
// embeddings, from 0); seen, if set, is told the residual stream (T,d)
// leaving each layer (cpu.State.Trace). The rows (T, Vocab+Routes) lie in
// a buffer that the next Run overwrites.
func (x *Mix) Run(tokens []int, c Choice, from int, h []float32, seen func(l int, x []float32)) ([]float32, error) {
	if x.dev != nil {
		return x.runGPU(tokens, c, from, seen)
	}
	m, err := model.Assemble(x.g, func(s model.Spec) (*model.Matrix, error) {
		r := x.ref[s.Name]
		if r == nil {
			return nil, nil // a bias this architecture does not have
		}
		if w, ok := c.Over[s.Name]; ok {
			if len(w) != r.Rows*r.Cols {
				return nil, fmt.Errorf("engine: %d values replace %s (%d×%d)", len(w), s.Name, r.Rows, r.Cols)
			}
			return &model.Matrix{Rows: r.Rows, Cols: r.Cols, Data: w}, nil
		}
		if c.Test != nil && len(s.Shape) == 2 && c.Test(s.Name) {
			return x.test[s.Name], nil
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	if x.st == nil || x.st.Cap() < len(tokens) {
		if x.st, err = cpu.New(m, len(tokens)); err != nil {
			return nil, err
		}
		if x.acts8 {
			x.st.Acts8()
		}
	} else if err := x.st.Use(m); err != nil {
		return nil, err
	}
	return x.st.Trace(tokens, from, h, seen)
}

// runGPU runs a whole window on the device: a program built from the
// matrices c chooses, each uploaded from its set's files, every row read
// back. A device program runs from the embeddings and keeps its residual
// stream on the device: no boundaries, and no replaced matrices.
func (x *Mix) runGPU(tokens []int, c Choice, from int, seen func(int, []float32)) ([]float32, error) {
	switch {
	case from != 0 || seen != nil:
		return nil, errors.New("engine: a mix on a device runs whole windows: no layer boundaries")
	case len(c.Over) > 0:
		return nil, errors.New("engine: a mix on a device takes the reference's or the test's matrices, no others")
	}
	src := mixSource{ref: x.refSrc, test: x.testSrc, pick: c.Test}
	st, err := gpuengine.New(x.dev, x.g, src, gpuengine.Options{Capacity: len(tokens), Acts8: x.acts8, Pipelines: x.pipes, Workgroup: x.wg})
	if err != nil {
		return nil, err
	}
	if x.wg == 0 { // measured on a real GPU's first run: not again on every run
		_, x.wg = st.Workgroups()
	}
	e := &gpuEngine{State: st, dev: x.dev, vocab: x.g.Vocab, routes: x.g.Routes()}
	defer e.Close()
	w := Width(e)
	out := make([]float32, 0, len(tokens)*w)
	for a := 0; a < len(tokens); a += e.Chunk() {
		r, err := e.Submit(tokens[a:min(len(tokens), a+e.Chunk())], All)
		if err != nil {
			return nil, err
		}
		rows, err := e.Read(r)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			out = append(out, row...)
		}
	}
	return out, nil
}

// mixSource serves the test's matrices where pick says so, else the
// reference's, and the reference's vectors (a variant or a GGUF file
// keeps norms and biases as float32 copies of them).
type mixSource struct {
	ref, test gpuengine.Source
	pick      func(name string) bool
}

func (s mixSource) Matrix(name string, maxBytes int64) ([]gpuengine.Piece, error) {
	if s.pick != nil && s.pick(name) {
		return s.test.Matrix(name, maxBytes)
	}
	return s.ref.Matrix(name, maxBytes)
}

func (s mixSource) Vector(name string) ([]float32, error) { return s.ref.Vector(name) }
