package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/sidecar"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// Model is one servable checkpoint directory and what /models/ says of it.
type Model struct {
	Name         string        `json:"name"`
	Architecture string        `json:"architecture"`
	Vocab        int           `json:"vocab"`
	Variants     []VariantInfo `json:"variants"`
	Files        []ModelFile   `json:"files"`
	// What the page says of the model and offers to run, from the
	// directory's sidecar (package sidecar): its nature (synthetic,
	// trained-demo, or user when there is none), one line about it, and a
	// ready prompt and panel text.
	Nature string `json:"nature"`
	About  string `json:"about,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	Panel  string `json:"panel,omitempty"`
	dir    string // symlinks resolved: the prefix every file must keep
}

// ModelFile is one file the page may fetch. The page keys its Cache Storage
// by SHA256, so it is the file's real hash, the same one its ETag carries.
type ModelFile struct {
	Path   string `json:"path"` // relative to the model directory, slash-separated
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Kinds of VariantInfo.
const (
	KindVariant = "variant" // a quantized variant directory under variants/
	KindGGUF    = "gguf"    // a llama.cpp GGUF file in the model directory
	KindHub     = "hub"     // a checkpoint another tool quantized, under hub/
	KindONNX    = "onnx"    // an ONNX export under onnx/, which the page runs through onnxruntime-web
)

// VariantInfo is one set of weights the page can run besides the float
// checkpoint: a quantized variant, named by its manifest's seal (which pins
// every shard's sha256, so the page can cache shards forever under it), a
// GGUF file converted from this checkpoint, named by its sha256, or a
// checkpoint quantized by a hub tool (GPTQ, AWQ, compressed-tensors, MLX,
// bitsandbytes) under hub/, whose files Files lists with their sha256s.
type VariantInfo struct {
	Kind           string `json:"kind"`                      // KindVariant, KindGGUF, KindHub or KindONNX
	Name           string `json:"name"`                      // what ls_open takes: the scheme, the GGUF's file name, or hub/DIR; an ONNX export's path (onnx/NAME.onnx), which the page opens instead
	Scheme         string `json:"scheme,omitempty"`          // a variant's, or the one an ONNX export was made of (f32, q4)
	ManifestSHA256 string `json:"manifest_sha256,omitempty"` // a variant's seal
	SHA256         string `json:"sha256,omitempty"`          // a GGUF's or an ONNX export's; a hub checkpoint's fingerprint (checkpoint.Fingerprint)
	Bytes          int64  `json:"bytes"`                     // all shards together, or the GGUF, for a download estimate
	Policy         string `json:"policy,omitempty"`          // which matrices a variant quantizes, when not all
	// Types is a GGUF's tensors per ggml type ("Q4_K": 169), the mix its
	// recipe (Q4_K_M) chose, as llama.cpp's loader lists it.
	Types map[string]int `json:"types,omitempty"`
	// Format is a hub checkpoint's format and settings, as its
	// config.json states them ("gptq 4-bit g128 sym").
	Format string `json:"format,omitempty"`
	// MaxLen is the longest input an ONNX export takes (its RoPE and
	// causal-mask tables' length).
	MaxLen int `json:"max_len,omitempty"`
}

// LoadModel reads dir's config.json and every variant under dir/variants.
// A variant that fails verification is left out with a warning rather than
// failing the model: the float checkpoint is still worth serving.
func LoadModel(name, dir string, warn func(format string, args ...any)) (*Model, error) {
	if _, err := cleanRel(name); err != nil || filepath.Base(name) != name {
		return nil, fmt.Errorf("model name %q: not a single plain path segment", name)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, err
	}
	// A regular file: reading a FIFO would wait for a writer forever.
	if st, err := os.Stat(filepath.Join(real, "config.json")); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", filepath.Join(dir, "config.json"))
	}
	data, err := os.ReadFile(filepath.Join(real, "config.json"))
	if err != nil {
		return nil, err
	}
	cfg, err := checkpoint.ParseConfig(data, filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	m := &Model{Name: name, Architecture: cfg.Arch(), Vocab: cfg.VocabSize, Variants: []VariantInfo{}, dir: real}
	note, err := sidecar.Read(real)
	if err != nil {
		// The weights are still worth serving; the page then calls the
		// model the user's, which is the safe default.
		warn("serve: model %s: %v (described as the user's model)", name, err)
		note = sidecar.Note{Nature: sidecar.User}
	}
	m.Nature, m.About, m.Prompt, m.Panel = note.Nature, note.About, note.Prompt, note.Panel
	schemes, _ := os.ReadDir(filepath.Join(real, "variants"))
	fingerprint := "" // the checkpoint's, as its variants' manifests name it
	for _, e := range schemes {
		if !e.IsDir() || e.Name()[0] == '.' {
			continue // hidden: an unfinished or replaced variant.Write
		}
		v, err := variant.Open(filepath.Join(real, "variants", e.Name()))
		if err != nil {
			if !os.IsNotExist(err) {
				warn("serve: model %s: variant %s skipped: %v", name, e.Name(), err)
			}
			continue
		}
		fingerprint = v.Manifest.Model
		info := VariantInfo{Kind: KindVariant, Name: e.Name(), Scheme: e.Name(), ManifestSHA256: v.Manifest.Seal, Policy: v.Manifest.Policy.String()}
		for _, s := range v.Manifest.Shards {
			info.Bytes += s.Size
		}
		m.Variants = append(m.Variants, info)
	}
	// Most precise first, as quant.Schemes lists them, for a stable listing.
	rank := func(s string) int {
		for i, q := range quant.Schemes {
			if string(q) == s {
				return i
			}
		}
		return len(quant.Schemes)
	}
	sort.SliceStable(m.Variants, func(i, j int) bool { return rank(m.Variants[i].Scheme) < rank(m.Variants[j].Scheme) })
	ggufs, err := loadGGUFs(name, real, warn)
	if err != nil {
		return nil, err
	}
	m.Variants = append(m.Variants, ggufs...)
	hubs, err := loadHubs(name, real, warn)
	if err != nil {
		return nil, err
	}
	m.Variants = append(m.Variants, hubs...)
	m.Variants = append(m.Variants, loadONNX(name, real, cfg, fingerprint, warn)...)
	if m.Files, err = listFiles(real, m.Variants); err != nil {
		return nil, err
	}
	for i, v := range m.Variants {
		for _, f := range m.Files {
			switch {
			case (v.Kind == KindGGUF || v.Kind == KindONNX) && f.Path == v.Name:
				m.Variants[i].SHA256 = f.SHA256
			case v.Kind == KindHub && strings.HasPrefix(f.Path, v.Name+"/"):
				m.Variants[i].Bytes += f.Size
			}
		}
	}
	return m, nil
}

// loadHubs lists the hub checkpoints under realDir/hub that engine.wasm
// would open as this checkpoint's weights, in name order: each is checked
// as far as its config and tokenizer go (hubquant.Describe: the same
// model, a format a reader here takes), reading no weight; ls_open checks
// every tensor when one runs. One that fails is left out with a warning.
func loadHubs(name, realDir string, warn func(format string, args ...any)) ([]VariantInfo, error) {
	entries, err := os.ReadDir(filepath.Join(realDir, hubquant.Subdir))
	if err != nil {
		return nil, nil // none: most models have no hub checkpoint
	}
	var out []VariantInfo
	var ck *checkpoint.Checkpoint
	for _, e := range entries {
		rel := path.Join(hubquant.Subdir, e.Name())
		if e.Name()[0] == '.' || !e.IsDir() {
			continue
		}
		if real, err := filepath.EvalSymlinks(filepath.Join(realDir, rel)); err != nil || !within(realDir, real) {
			continue // a link out of the model directory: not served
		}
		if ck == nil {
			if ck, err = checkpoint.OpenWithoutWeights(realDir); err != nil {
				return nil, err
			}
			defer ck.Close()
		}
		format, err := hubquant.Describe(ck, filepath.Join(realDir, rel))
		var fp string
		if err == nil {
			fp, err = hubFingerprint(realDir, rel)
		}
		if err != nil {
			warn("serve: model %s: %s skipped: %v", name, rel, err)
			continue
		}
		out = append(out, VariantInfo{Kind: KindHub, Name: rel, Format: format, SHA256: fp})
	}
	return out, nil
}

// hubFingerprint is the checkpoint.Fingerprint of the hub checkpoint at
// realDir/rel, from the sums the file list hashes anyway: what a capture's
// receipt records of it (receipt.Hub), so the page's document can too.
func hubFingerprint(realDir, rel string) (string, error) {
	index, err := os.ReadFile(filepath.Join(realDir, rel, "model.safetensors.index.json"))
	if errors.Is(err, fs.ErrNotExist) {
		index, err = nil, nil
	}
	if err != nil {
		return "", err
	}
	shards, err := checkpoint.WeightFiles(index, path.Join(rel, "model.safetensors.index.json"))
	if err != nil {
		return "", err
	}
	var sums []checkpoint.FileSum
	for _, n := range append([]string{"config.json"}, shards...) {
		fi, err := describe(realDir, path.Join(rel, n))
		if errors.Is(err, errSkip) {
			return "", fmt.Errorf("%s: not a file served from the model directory", path.Join(rel, n))
		}
		if err != nil {
			return "", err
		}
		sums = append(sums, checkpoint.FileSum{Name: n, SHA256: fi.SHA256})
	}
	return checkpoint.FingerprintOf(sums), nil
}

// loadGGUFs lists the GGUF files at the top of the model directory realDir
// that engine.wasm would open as this checkpoint's weights, in name order:
// each is checked as ls_open checks it (architecture, hyperparameters,
// every tensor's shape and type, the vocabulary token by token), reading
// its header only. One that fails is left out with a warning, as a variant
// that fails verification is: it would only fail in the page.
func loadGGUFs(name, realDir string, warn func(format string, args ...any)) ([]VariantInfo, error) {
	entries, err := os.ReadDir(realDir)
	if err != nil {
		return nil, err
	}
	var out []VariantInfo
	var ck *checkpoint.Checkpoint
	for _, e := range entries {
		if e.Name()[0] == '.' || !gguf.IsFileName(e.Name()) {
			continue
		}
		if _, ok := modelFileKind(e.Name()); !ok {
			continue
		}
		f, st, err := openUnder(realDir, e.Name())
		if err != nil {
			continue // a symlink out of the directory, or not a regular file: not served
		}
		f.Close()
		if ck == nil {
			if ck, err = checkpoint.OpenWithoutWeights(realDir); err != nil {
				return nil, err
			}
			defer ck.Close()
		}
		w, err := engine.OpenGGUF(ck, filepath.Join(realDir, e.Name()))
		if err != nil {
			warn("serve: model %s: %s skipped: %v", name, e.Name(), err)
			continue
		}
		out = append(out, VariantInfo{Kind: KindGGUF, Name: e.Name(), Bytes: st.Size(), Types: ggufmodel.TypeNames(w.Types())})
	}
	return out, nil
}

// ScanModels loads every subdirectory of root that holds a config.json,
// named by its directory name, in name order. A subdirectory that is a
// symlink leading out of root is skipped with a warning: root is the
// served directory, and a link out of it would serve whatever it points
// at (a link to another directory inside root is fine).
func ScanModels(root string, warn func(format string, args ...any)) ([]*Model, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	realRoot, err := realDir(root)
	if err != nil {
		return nil, err
	}
	var models []*Model
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if e.Name()[0] == '.' {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
			continue
		}
		if real, err := realDir(dir); err != nil || !within(realRoot, real) {
			warn("serve: %s skipped: it leads out of %s (to %s)", dir, root, real)
			continue
		}
		m, err := LoadModel(e.Name(), dir, warn)
		if err != nil {
			warn("serve: %s skipped: %v", dir, err)
			continue
		}
		models = append(models, m)
	}
	sort.Slice(models, func(i, j int) bool { return models[i].Name < models[j].Name })
	return models, nil
}
