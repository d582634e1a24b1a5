package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"logitscope/internal/engine/internal/acts"
	"logitscope/internal/engine/internal/gpuengine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/text/tokenizer"
)

// Options for Open.
type Options struct {
	// Variant is the quantized weights to run (OpenVariant); nil runs the
	// checkpoint's own bytes (the f32 reference).
	Variant *variant.Variant
	// GGUF runs a llama.cpp file's weights instead (OpenGGUF).
	GGUF *ggufmodel.Weights
	// Quantized runs a hub quantization's weights instead (GPTQ, AWQ,
	// compressed-tensors, MLX, bitsandbytes): each matrix it looks up as
	// its lookup matrix, decoded in the products (the embedding's rows
	// too, and a tied LM head's), every other tensor as float32 from
	// Float32. Not with Variant or GGUF.
	Quantized model.Quantized
	// Device runs the WGSL program; nil runs the CPU reference.
	Device gpu.Device
	// Capacity is the KV cache length in tokens.
	Capacity int
	// Progress, if set, is told how far loading has come: bytes of weights
	// read for the CPU, tensors uploaded for the GPU, as unit says.
	Progress func(done, total int64, unit string)
	// MaxPieceBytes, if set, uploads matrices in smaller pieces than the
	// device's binding limit asks (tests exercise the split path with it).
	MaxPieceBytes int64
	// Activations is how products with quantized weights take their
	// activations: "" or ActsF32, as float32, or ActsQ8, rounded to 8-bit
	// blocks first as llama.cpp's CPU backend does for its quantized types
	// (on the GPU too, with packed 8-bit dot products, for dense models).
	// It applies to Q4_0, Q8_0 and quant's schemes; every other GGUF type
	// (the K-quants, i-quants, TQ1_0, TQ2_0, MXFP4) takes float32
	// activations under either value, its rows decoded as ggml decodes
	// them, not through llama.cpp's vec_dot with Q8_K activations.
	// With Quantized, products with its lookup matrices may instead round
	// each token's activations as vLLM's kernels do (package acts):
	// ActsInt8, ActsFP8 or ActsFP4 for every lookup matrix, or ActsFormat
	// for each as its format declares (Quantized.Acts: a W8A8 checkpoint's
	// int8, FP8-dynamic's fp8, NVFP4's fp4, float for the others).
	Activations string
	// Files are files already in memory, by path (engine.wasm's host puts
	// the weights' files in guest memory: wasm/ABI.md, ls_open): the CPU
	// takes its weights from them in place, as from a mapped file, instead
	// of reading a copy. Every other read still goes to the file system.
	Files map[string][]byte
	// Workgroup, when not 0, fixes the GPU's matmul workgroup size (32,
	// 64, 128 or 256); 0 lets the engine choose it per adapter, measuring
	// on real GPUs. Every size gives the same logits, bit for bit.
	Workgroup int
}

// The activations a product with quantized weights takes (Options).
const (
	ActsF32    = "f32"
	ActsQ8     = "q8"
	ActsInt8   = acts.Int8
	ActsFP8    = acts.FP8
	ActsFP4    = acts.FP4
	ActsFormat = "format"
)

// CheckActivations refuses an Activations value that is not one of the
// above.
func CheckActivations(mode string) error {
	switch mode {
	case "", ActsF32, ActsQ8, ActsInt8, ActsFP8, ActsFP4, ActsFormat:
		return nil
	}
	return fmt.Errorf("activations %q: want %s (float32), %s (8-bit blocks, llama.cpp's CPU arithmetic), or for a hub quantization's weights %s, %s or %s (per token, as vLLM's kernels) or %s (as the checkpoint declares)",
		mode, ActsF32, ActsQ8, ActsInt8, ActsFP8, ActsFP4, ActsFormat)
}

// lookupActs is whether mode rounds the activations of lookup matrices
// only (a hub quantization's).
func lookupActs(mode string) bool {
	return mode == ActsInt8 || mode == ActsFP8 || mode == ActsFP4 || mode == ActsFormat
}

// actsFor is how the products with q's lookup matrix name round their
// activations under mode (package acts' names, "" for float32).
func actsFor(q model.Quantized, mode string) func(name string) string {
	return func(name string) string {
		switch mode {
		case ActsFormat:
			return q.Acts(name)
		case ActsInt8, ActsFP8, ActsFP4:
			return mode
		}
		return ""
	}
}

// Open checks the weights (the variant's, else the checkpoint's: a model
// opened from a GGUF file, ck.GGUF, runs that file's) against the
// checkpoint's geometry, then loads them on the device or the CPU, as
// stored on both: the GPU uploads them, the CPU reads them into memory.
func Open(ck *checkpoint.Checkpoint, opt Options) (Engine, error) {
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ck.Dir, err)
	}
	if opt.Variant == nil && opt.GGUF == nil && opt.Quantized == nil && ck.GGUF != "" {
		if opt.GGUF, err = ggufmodel.Open(ck.GGUF, g); err != nil {
			return nil, err
		}
	}
	if n := count(opt.Variant != nil, opt.GGUF != nil, opt.Quantized != nil); n > 1 {
		return nil, errors.New("engine: one of a variant, a GGUF file and a hub quantization's weights, not several")
	}
	if err := CheckActivations(opt.Activations); err != nil {
		return nil, err
	}
	if lookupActs(opt.Activations) && opt.Quantized == nil {
		return nil, fmt.Errorf("activations %s: they round the products with a hub quantization's lookup matrices, and %s runs none (open its quantized checkpoint)", opt.Activations, ck.Dir)
	}
	src, w := opt.weights(ck)
	if err := model.Check(ck.Dir, g, w); err != nil {
		return nil, err
	}
	if opt.Device == nil {
		m, release, err := loadCPU(g, src, w, opt.Files, opt.progress("bytes"))
		if err != nil {
			return nil, err
		}
		return newCPU(m, opt.Capacity, opt.Activations == ActsQ8, release)
	}
	e, err := gpuengine.New(opt.Device, g, src, gpuengine.Options{
		Capacity: opt.Capacity, MaxPieceBytes: opt.MaxPieceBytes, Progress: opt.progress("tensors"), Acts8: opt.Activations == ActsQ8,
		Workgroup: opt.Workgroup})
	if err != nil {
		return nil, err
	}
	return &gpuEngine{State: e, dev: opt.Device, vocab: g.Vocab, routes: g.Routes(), name: DeviceName(opt.Device)}, nil
}

// weights are the weights o runs: the hub quantization's, the variant's,
// the GGUF file's, else the checkpoint's own.
func (o Options) weights(ck *checkpoint.Checkpoint) (gpuengine.Source, model.Weights) {
	switch {
	case o.Quantized != nil:
		return gpuengine.QuantizedSource(o.Quantized, actsFor(o.Quantized, o.Activations)), o.Quantized
	case o.Variant != nil:
		return gpuengine.VariantSource(o.Variant), o.Variant
	case o.GGUF != nil:
		return gpuengine.GGUFSource(o.GGUF), o.GGUF
	}
	return gpuengine.CheckpointSource(ck), model.CheckpointWeights(ck)
}

// count is how many of set are true.
func count(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

// progress is Progress for one unit, or nil.
func (o Options) progress(unit string) func(done, total int64) {
	if o.Progress == nil {
		return nil
	}
	return func(done, total int64) { o.Progress(done, total, unit) }
}

// DeviceName is how receipts and logs name a device: "gpu: <adapter>
// (<backend>)", or "cpu" for none.
func DeviceName(dev gpu.Device) string {
	if dev == nil {
		return "cpu"
	}
	info := dev.Info()
	return fmt.Sprintf("gpu: %s (%s)", info.Adapter, info.Backend)
}

// OpenGGUF opens a llama.cpp GGUF file as the weights of ck's model, after
// checking that it is that model: the architecture, hyperparameters and
// every tensor's shape (ggufmodel.Open) and the vocabulary, token by token
// (a file converted from another checkpoint of the same shape would
// otherwise compare token ids that mean different things).
func OpenGGUF(ck *checkpoint.Checkpoint, path string) (*ggufmodel.Weights, error) {
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ck.Dir, err)
	}
	w, err := ggufmodel.Open(path, g)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return nil, err
	}
	if err := w.CheckTokenizer(tok); err != nil {
		return nil, fmt.Errorf("%w: it was not converted from %s", err, ck.Dir)
	}
	return w, nil
}

// VariantDir maps a variant name to its directory: "" for f32 (the
// checkpoint's own bytes), MODEL/variants/SCHEME for a scheme name, else
// the name itself as a path.
func VariantDir(modelDir, name string) string {
	switch {
	case name == "f32" || name == "":
		return ""
	case !strings.ContainsAny(name, `/\`):
		if s, err := variant.ParseScheme(name); err == nil {
			return variant.DefaultDir(modelDir, string(s))
		}
	}
	return name
}

// OpenVariant opens the variant a name stands for (VariantDir) and checks
// that it was quantized from this checkpoint (when ck was opened with its
// weights: without them the manifest's model_sha256 is taken as it
// stands); nil for f32. Hashing streams
// every shard through a small buffer: in wasm the bytes never stay in
// guest memory. A model opened from a GGUF file has no variants but
// itself (f32 names its own weights) and other GGUF files (OpenGGUF).
func OpenVariant(ck *checkpoint.Checkpoint, name string) (*variant.Variant, error) {
	dir := VariantDir(ck.Dir, name)
	if dir == "" {
		return nil, nil
	}
	if ck.GGUF != "" {
		return nil, fmt.Errorf("variant %s: the model %s is a GGUF file, which has no logitscope variants (they quantize a Hugging Face checkpoint's weights): "+
			"quantize the checkpoint it was converted from instead (logitscope quantize --model CHECKPOINT_DIR --scheme q4), or compare another GGUF file (--variant OTHER.gguf)", name, ck.GGUF)
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); errors.Is(err, fs.ErrNotExist) {
		switch {
		case dir == name && !strings.ContainsAny(name, `/\`):
			// Neither a scheme nor, by its look, a directory: a mistyped
			// scheme (q5) is likelier than a variant in the working
			// directory, and no quantize command would make it.
			return nil, fmt.Errorf("--variant %s: no such scheme or variant directory (schemes: f32, %s; or a variant directory, or a GGUF file)", name, schemeList())
		case hubquant.Is(dir):
			return nil, fmt.Errorf("%s is a checkpoint another tool quantized (config.json's quantization_config), not a logitscope variant: capture, report and conform take it as --variant; this command reads logitscope variants only", dir)
		case dir != variant.DefaultDir(ck.Dir, filepath.Base(dir)):
			// A directory of the user's: which scheme it should hold is
			// not known here.
			return nil, fmt.Errorf("no variant at %s (no manifest.json): give a directory that logitscope quantize --out wrote", dir)
		}
		return nil, fmt.Errorf("no variant at %s: run logitscope quantize --model %s --scheme %s", dir, ck.Dir, filepath.Base(dir))
	}
	v, err := variant.Open(dir)
	if err != nil {
		return nil, err
	}
	if !ck.HasWeights() {
		// Opened without its weights (OpenWithoutWeights: a browser that
		// would download them only to hash them): the variant holds every
		// tensor, and its sealed manifest's model_sha256 is the only word
		// on which checkpoint it was quantized from.
		return v, nil
	}
	fp, err := ck.Fingerprint()
	if err != nil {
		return nil, err
	}
	if err := v.CheckSource(fp); err != nil {
		again := fmt.Sprintf("logitscope quantize --model %s --scheme %s", ck.Dir, v.Manifest.Scheme)
		if dir != variant.DefaultDir(ck.Dir, v.Manifest.Scheme) {
			again += " --out " + dir
		}
		if v.Manifest.Policy != nil {
			again += " with the policy it had (" + v.Manifest.Policy.String() + ")"
		}
		return nil, fmt.Errorf("%w: run %s", err, again)
	}
	return v, nil
}

// schemeList is the quantization schemes, "q8, q6, q4".
func schemeList() string {
	s := make([]string, len(quant.Schemes))
	for i, sc := range quant.Schemes {
		s[i] = string(sc)
	}
	return strings.Join(s, ", ") + ", exl3-kK[-CODEBOOK]"
}
