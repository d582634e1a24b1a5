// Package capture runs one request on one variant of a checkpoint, on the
// device and runtime asked for, and saves its logit rows as a dump with a
// sealed receipt beside it: what the capture command and conformance
// suites both do. The native runtime is the Go engine; the wasm runtime is
// engine.wasm under wazero, the very module a browser runs.
package capture

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"logitscope/internal/engine"
	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/receipt"
	"logitscope/internal/format/routing"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/session"
	"logitscope/internal/sys/progress"
	"logitscope/internal/sys/tempfile"
)

// Options say where a request runs.
type Options struct {
	Device  string    // gpu, cpu, or auto: the GPU when an adapter exists
	Runtime string    // native, wasm, or auto (AutoRuntime)
	Engine  string    // engine.wasm for the wasm runtime (EnginePath)
	Log     io.Writer // which device and runtime run, and why
	// Activations is engine.Options.Activations: f32 (or ""), or q8,
	// which runs natively (auto picks it).
	Activations string
	// Progress shows loading the weights and running the request's
	// tokens (nil: nothing shown).
	Progress progress.Meter
	// Window, when set, runs a panel one window at a time on the open
	// engine and hands each window's result to it as the window finishes,
	// keeping none: the capture then holds one window, whatever the
	// panel's length, and its Result holds no rows. Omit says which
	// windows (indices into the request's) not to run: a resumed capture's
	// finished ones, another shard's.
	Window func(i int, r session.Result) error
	Omit   func(i int) bool
	// Inventory, when set, is the official checkpoint's inventory: a run
	// on local files that do not match it is refused before anything runs.
	Inventory *chain.Inventory
	// Panel is the panel request's receipt, which the chain carries.
	Panel *chain.Panel
	// LlamaCpp are the llama.cpp context's settings for runtime llama.cpp
	// (its build and context size come from the runtime and the request).
	LlamaCpp llamacpp.SessionOptions
}

// Capture is what a request produced and what its receipt records.
type Capture struct {
	session.Result
	Variant  string        // the variant's label: f32, a scheme, or a directory's name
	Manifest string        // the variant's manifest seal; "" for f32
	GGUF     *receipt.GGUF // the weights are a GGUF file (the variant, or the model itself)
	Hub      *receipt.Hub  // the weights are a hub-quantized checkpoint (the variant)
	Policy   string        // the variant's quantization policy; "" for all matrices
	Device   string        // "cpu", "gpu: <adapter>", "wasm+gpu: <adapter>", "wasm+cpu"
	Took     time.Duration // the request, once the model was loaded
	// Routing labels Result.Routes: the model's sparse layers, TopK and
	// experts (the zero Layout for a dense model, whose Routes are nil).
	Routing routing.Layout
	// Chain is where the rows came from, from the checkpoint's files to
	// the backend that ran them (package chain).
	Chain *chain.Chain
	// LlamaCpp is what llama.cpp ran with (runtime llama.cpp), which the
	// chain's backend records.
	LlamaCpp *llamacpp.Settings
}

// Run runs req on the variant of ck that variantName names (f32, q8, q6,
// q4, a variant directory: engine.VariantDir; or a GGUF file). A model
// opened from a GGUF file (ck.GGUF) runs the file's own weights for f32,
// or another GGUF file; it runs natively, as engine.wasm does not read
// GGUF files.
func Run(ck *checkpoint.Checkpoint, variantName string, req session.Request, opt Options) (*Capture, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.Progress == nil {
		opt.Progress = progress.Discard
	}
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Dir, err)
	}
	c := &Capture{Variant: VariantLabel(variantName), Routing: g.RouteLayout()}
	// Opened natively on either runtime: verified against the checkpoint
	// before anything runs, and its seal (a GGUF's sha256) goes into the
	// receipt.
	if err := engine.CheckActivations(opt.Activations); err != nil {
		return nil, err
	}
	// Where it runs, refused before anything opens when it cannot.
	rt, note, err := runtimeFor(ck, variantName, opt)
	if err != nil {
		return nil, err
	}
	if note != "" {
		fmt.Fprintf(opt.Log, "runtime: native (%s)\n", note)
	}
	// Every identity before any compute, the inventory first: a
	// checkpoint that is not the official inventory's is refused before
	// its weights open.
	inv, err := inventory(ck, opt)
	if err != nil {
		return nil, err
	}
	eo := engine.Options{Capacity: req.Capacity(), Progress: loading(opt.Progress), Activations: opt.Activations}
	if err := openWeights(ck, variantName, g, &eo, c); err != nil {
		return nil, err
	}
	if w, ok := eo.Quantized.(io.Closer); ok {
		defer w.Close()
	}
	if c.Chain, err = links(ck, inv, c, eo.Variant, opt); err != nil {
		return nil, err
	}
	switch {
	case llamaBuild(rt) != "":
		err = runLlamaCpp(ck, variantName, rt, req, opt, c)
	case rt == "wasm":
		err = runWasm(ck, variantName, req, opt, c)
	case rt == "native":
		err = runNative(ck, eo, req, opt, c)
	default:
		err = CheckRuntime(rt) // not reached: runtimeFor checked it
	}
	if err != nil {
		return nil, err
	}
	if c.Chain.Backend, err = backendOf(c.Chain.Checkpoint, Target{Runtime: rt, Device: c.Device}, opt, c.LlamaCpp); err != nil {
		return nil, err
	}
	return c, nil
}

// openWeights opens the weights variantName names into eo (a variant, a
// GGUF file, or a hub-quantized checkpoint) and records in c what the
// receipt says of them.
func openWeights(ck *checkpoint.Checkpoint, variantName string, g model.Geometry, eo *engine.Options, c *Capture) error {
	var err error
	switch {
	case isHub(ck, variantName):
		w, err := hubquant.OpenFor(ck, variantName)
		if err != nil {
			return err
		}
		sum, err := w.Checkpoint.Fingerprint()
		if err != nil {
			w.Close()
			return err
		}
		eo.Quantized, c.Hub = w, &receipt.Hub{Format: w.Format(), SHA256: sum}
	case gguf.IsFileName(variantName):
		if eo.GGUF, err = engine.OpenGGUF(ck, variantName); err != nil {
			return err
		}
		sum, err := checkpoint.FileSHA256(variantName)
		if err != nil {
			return err
		}
		c.GGUF = ggufReceipt(eo.GGUF, sum)
	case ck.GGUF != "" && engine.VariantDir(ck.Dir, variantName) == "":
		// A model opened from a GGUF file runs its own weights: the
		// receipt names and describes the file as for a GGUF variant, and
		// its sha256 is the model's fingerprint.
		if eo.GGUF, err = ggufmodel.Open(ck.GGUF, g); err != nil {
			return err
		}
		sum, err := ck.Fingerprint()
		if err != nil {
			return err
		}
		c.GGUF, c.Variant = ggufReceipt(eo.GGUF, sum), eo.GGUF.Name()
	default:
		if eo.Variant, err = engine.OpenVariant(ck, variantName); err != nil {
			return err
		}
		if v := eo.Variant; v != nil {
			c.Manifest, c.Policy = v.Manifest.Seal, v.Manifest.Policy.String()
		}
	}
	return nil
}

// isHub says whether variantName is a directory another tool quantized
// (config.json with a quantization_config, no manifest.json) for a model
// opened from its Hugging Face checkpoint.
func isHub(ck *checkpoint.Checkpoint, variantName string) bool {
	return ck.GGUF == "" && engine.VariantDir(ck.Dir, variantName) == variantName && hubquant.Is(variantName)
}

// ggufReceipt is what a receipt records of a GGUF file whose sha256 is
// sum.
func ggufReceipt(w *ggufmodel.Weights, sum string) *receipt.GGUF {
	return &receipt.GGUF{SHA256: sum, Types: ggufmodel.TypeNames(w.Types())}
}

// runNative runs req on the Go engine, on the device opt asks for.
func runNative(ck *checkpoint.Checkpoint, eo engine.Options, req session.Request, opt Options, c *Capture) error {
	dev, name, err := openDevice(opt, engine.DeviceName)
	if err != nil {
		return err
	}
	if dev != nil {
		defer dev.Close()
		eo.Device = dev
	}
	c.Device = name
	if opt.Activations == engine.ActsQ8 {
		c.Device += acts8Device
	}
	e, err := engine.Open(ck, eo)
	if err != nil {
		return err
	}
	defer e.Close()
	start := time.Now()
	defer func() { c.Took = time.Since(start) }()
	opt.Progress.Start(int64(opt.tokens(req)), "capture "+string(req.Mode), "tokens")
	defer opt.Progress.Done()
	return drive(req, opt, c, func(req session.Request) (session.Result, error) {
		return session.DriveTracked(e, req, func(n int) { opt.Progress.Add(int64(n)) })
	})
}

// drive runs req on an open engine through run: whole, into c.Result, or
// with opt.Window a panel window by window.
func drive(req session.Request, opt Options, c *Capture, run func(session.Request) (session.Result, error)) (err error) {
	if !opt.windowed(req) {
		c.Result, err = run(req)
		return err
	}
	for _, i := range opt.windows(req) {
		r, err := run(session.Request{Mode: session.Panel, Windows: [][]int{req.Windows[i]}, Prefix: req.Prefix})
		if err == nil {
			err = opt.Window(i, r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (opt Options) windowed(req session.Request) bool {
	return opt.Window != nil && req.Mode == session.Panel
}

// windows is the indices of the windows a windowed panel runs: all but
// those opt.Omit leaves out.
func (opt Options) windows(req session.Request) []int {
	var idx []int
	for i := range req.Windows {
		if opt.Omit == nil || !opt.Omit(i) {
			idx = append(idx, i)
		}
	}
	return idx
}

// tokens is how many tokens of req run, for progress: a windowed panel's
// omitted windows do not.
func (opt Options) tokens(req session.Request) int {
	if !opt.windowed(req) {
		return req.Tokens()
	}
	n := 0
	for _, i := range opt.windows(req) {
		n += len(req.Windows[i])
	}
	return n
}

// acts8Device is what a receipt adds to the device's name when the
// products took 8-bit activations.
const acts8Device = ", activations q8"

// runtimeFor is the runtime opt asks for, made concrete: auto picks one
// (AutoRuntime), and a model opened from a GGUF file runs natively. note
// says why the run is native when it was not asked for.
func runtimeFor(ck *checkpoint.Checkpoint, variantName string, opt Options) (rt, note string, err error) {
	rt = opt.Runtime
	if err := CheckRuntime(rt); err != nil {
		return "", "", err
	}
	if opt.Engine != "" && rt != "wasm" && rt != "auto" && rt != "" {
		return "", "", fmt.Errorf("--engine %s: %v, not --runtime %s", opt.Engine, errEngineFlag, rt)
	}
	if b := llamaBuild(rt); b != "" {
		return rt, "", checkLlamaCpp(ck, variantName, b, opt)
	}
	if opt.LlamaCpp != (llamacpp.SessionOptions{}) {
		return "", "", fmt.Errorf("llama.cpp's settings (--llama-*) are for --runtime %s, not %s", LlamaCpp, rt)
	}
	switch {
	case opt.Activations != "" && opt.Activations != engine.ActsF32 && rt == "wasm":
		return "", "", fmt.Errorf("--activations %s runs in the native engine only: engine.wasm takes float32 activations", opt.Activations)
	case opt.Activations != "" && opt.Activations != engine.ActsF32:
		return "native", "rounded activations run in the native engine", nil
	case ck.GGUF != "" && rt == "wasm":
		// engine.wasm opens a GGUF as a variant of the model directory it
		// sees, not as a model by itself.
		return "", "", fmt.Errorf("%s: engine.wasm does not read GGUF files as models: use --runtime native", ck.GGUF)
	case ck.GGUF != "":
		return "native", "engine.wasm does not read GGUF files as models", nil
	case rt == "auto" || rt == "":
		rt, note = AutoRuntime(opt, ck, variantName)
		return rt, note, nil
	}
	return rt, "", nil
}

// Target is where a request would run, as Run would pick it: the runtime,
// and the device as the receipt names it.
type Target struct {
	Runtime string `json:"runtime"`
	Device  string `json:"device"`
	// Why says why auto chose native, or the CPU.
	Why string `json:"why,omitempty"`
}

// Where says where Run would run a request with opt, running nothing: it
// opens the GPU (when asked for) only to name it. For dry runs.
func Where(ck *checkpoint.Checkpoint, variantName string, opt Options) (Target, error) {
	rt, note, err := runtimeFor(ck, variantName, opt)
	if err != nil {
		return Target{}, err
	}
	if b := llamaBuild(rt); b != "" {
		return Target{Runtime: rt, Device: LlamaCpp + ":" + b}, nil
	}
	dev, why, err := probeDevice(opt)
	if err != nil {
		return Target{}, err
	}
	t := Target{Runtime: rt, Device: engine.DeviceName(dev), Why: strings.Join(slices.DeleteFunc([]string{note, why}, func(s string) bool { return s == "" }), "; ")}
	if dev != nil {
		dev.Close()
	}
	if rt == "wasm" {
		t.Device = "wasm+" + t.Device
	}
	if opt.Activations == engine.ActsQ8 {
		t.Device += acts8Device
	}
	return t, nil
}

// openDevice opens what opt.Device asks for (probeDevice), names it with
// name and says which on opt.Log, and why when auto fell back to the CPU.
func openDevice(opt Options, name func(gpu.Device) string) (gpu.Device, string, error) {
	dev, why, err := probeDevice(opt)
	if err != nil {
		return nil, "", err
	}
	n := name(dev)
	if why != "" {
		why = " (" + why + ")"
	}
	fmt.Fprintf(opt.Log, "device: %s%s\n", n, why)
	return dev, n, nil
}

// probeDevice opens the native WebGPU for gpu or auto, none (nil: the
// CPU) for cpu or for auto without an adapter, saying why then.
func probeDevice(opt Options) (dev gpu.Device, why string, err error) {
	switch opt.Device {
	case "gpu", "auto":
		d, err := native.Open()
		switch {
		case err == nil:
			return d, "", nil
		case opt.Device == "gpu":
			return nil, "", err
		}
		return nil, err.Error(), nil
	case "cpu":
		return nil, "", nil
	}
	return nil, "", fmt.Errorf("--device %q: want gpu, cpu or auto", opt.Device)
}

// loading shows weight loading on m: bytes read for the CPU, tensors
// uploaded for the GPU.
func loading(m progress.Meter) func(done, total int64, unit string) {
	read := progress.Track(m, "loading weights", progress.Bytes)
	upload := progress.Track(m, "uploading weights", "tensors")
	return func(done, total int64, unit string) {
		if unit == "bytes" {
			read(done, total)
		} else {
			upload(done, total)
		}
	}
}

// VariantLabel is the scheme a variant name stands for, for receipts: f32,
// q8, q6, q4, or a variant directory's base name.
func VariantLabel(name string) string {
	if name == "" {
		return "f32"
	}
	if s, err := variant.ParseScheme(name); err == nil {
		return string(s)
	}
	if name == "f32" {
		return name
	}
	return filepath.Base(name)
}

// ReceiptRequest is what a receipt records of a request: prompt ids and
// decoding limits, or the panel's hash; follow is the sha256 of the dump a
// forced request feeds back.
func ReceiptRequest(req session.Request, follow string) receipt.Request {
	switch req.Mode {
	case session.Panel:
		return receipt.Request{Mode: req.Mode, Panel: receipt.PanelSHA256(req.Windows), Windows: len(req.Windows), Prefix: req.Prefix}
	case session.Forced:
		return receipt.Request{Mode: req.Mode, PromptIDs: req.PromptIDs, Stops: req.Stops, Follow: follow}
	}
	return receipt.Request{Mode: req.Mode, PromptIDs: req.PromptIDs, MaxNew: req.MaxNew, Stops: req.Stops}
}

// Logits is the rows as one dump of vocab-long rows, with the routes when
// the model is a mixture of experts.
func (c *Capture) Logits(vocab int) *dump.Logits {
	l := &dump.Logits{Rows: len(c.Rows), Vocab: vocab, Data: make([]float32, 0, len(c.Rows)*vocab)}
	for _, r := range c.Rows {
		l.Data = append(l.Data, r...)
	}
	if c.Routes != nil {
		rt := &routing.Routes{Layout: c.Routing, Rows: len(c.Routes), IDs: make([]int32, 0, len(c.Routes)*c.Routing.Width())}
		for _, r := range c.Routes {
			rt.IDs = append(rt.IDs, r...)
		}
		l.Routes = rt
	}
	return l
}

// Save writes c's rows as a dump at path (safetensors, with the routes of
// a mixture of experts, when path ends in .safetensors; else the binary
// dump, which has no room for routes) and its sealed receipt beside it,
// both whole or neither: each is written to a temporary, then the receipt
// is renamed into place before the dump, so that even a process killed
// between the two renames leaves no dump without its receipt (at worst a
// receipt whose dump is missing, or the previous dump, which the receipt
// then refuses by its sha256).
func Save(path string, ck *checkpoint.Checkpoint, rq receipt.Request, c *Capture) (*receipt.Receipt, error) {
	fp, err := ck.Fingerprint()
	if err != nil {
		return nil, err
	}
	vocab := ck.Config.VocabSize
	var tmp string
	if dump.IsSafetensors(path) {
		tmp, err = dump.WriteTemp(path, c.Logits(vocab))
	} else {
		tmp, err = tempfile.Write(path, func(w io.Writer) error { return dump.WriteRows(w, vocab, c.Rows) })
	}
	if err != nil {
		return nil, err
	}
	defer tempfile.Remove(tmp) // a no-op once renamed
	sum, err := checkpoint.FileSHA256(tmp)
	if err != nil {
		return nil, err
	}
	rc := &receipt.Receipt{
		Version: receipt.Version(), Model: fp, Variant: c.Variant, VariantManifest: c.Manifest, VariantPolicy: c.Policy, GGUF: c.GGUF, Hub: c.Hub,
		Device: c.Device, Request: rq, OutputIDs: c.Output, Targets: c.Targets,
		Dump: receipt.Dump{SHA256: sum, Rows: len(c.Rows), Vocab: vocab}, Chain: c.Chain,
	}
	if c.Chain != nil && c.Chain.Panel != nil {
		rc.Request.PanelReceipt = c.Chain.Panel.Seal
	}
	rtmp, err := receipt.WriteTemp(receipt.Path(path), rc)
	if err != nil {
		return nil, err
	}
	if err := tempfile.Rename(tempfile.Move{Temp: rtmp, Path: receipt.Path(path)}, tempfile.Move{Temp: tmp, Path: path}); err != nil {
		return nil, err
	}
	return rc, nil
}
