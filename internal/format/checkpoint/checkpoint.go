// Package checkpoint opens a Hugging Face model directory: config.json,
// generation_config.json, tokenizer files and one or more safetensors shards
// (or, for a model opened from a llama.cpp GGUF file, those files derived
// from its metadata and the file itself as the weights: OpenDerived).
package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"logitscope/internal/format/safetensors"
)

// Checkpoint is an opened model directory. Its read methods are safe for
// concurrent use.
type Checkpoint struct {
	Dir        string
	Config     Config
	Generation GenerationConfig
	// GGUF is the llama.cpp file holding the weights when the model was
	// opened from one (OpenDerived): Dir then holds only the config and
	// tokenizer files derived from its metadata, there are no shards, and
	// the engines read the weights from the file. "" for a Hugging Face
	// checkpoint.
	GGUF string

	shards  []*safetensors.File          // sorted by path
	tensors map[string]*safetensors.File // tensor name → shard holding it
	fp      string                       // Fingerprint, once computed
	sums    []FileSum                    // FileSums, once computed
}

// Open resolves path and opens config, generation config and all shards.
// A missing generation_config.json leaves Generation zero.
func Open(path string) (*Checkpoint, error) {
	c, err := openConfig(path)
	if err != nil {
		return nil, err
	}
	if err := c.openShards(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// OpenWithoutWeights opens config and generation config but no shard: the
// checkpoint of a model whose weights come from elsewhere (a GGUF file
// converted from it, or a quantized variant of it). The browser then
// neither downloads nor holds the safetensors, which for a quantized
// model are several times its size. It
// has no tensors, and Fingerprint, which hashes the weights, fails.
func OpenWithoutWeights(path string) (*Checkpoint, error) {
	c, err := openConfig(path)
	if err != nil {
		return nil, err
	}
	c.tensors = map[string]*safetensors.File{}
	return c, nil
}

// HasWeights says whether the checkpoint was opened with its weights:
// safetensors shards (Open) or a GGUF file (OpenDerived).
func (c *Checkpoint) HasWeights() bool { return len(c.shards) > 0 || c.GGUF != "" }

// WeightsPresent says whether the directory at path holds safetensors
// weights (an index or model.safetensors) for Open to read. A browser
// that opens a quantized variant mounts the directory without them.
func WeightsPresent(path string) bool {
	dir, err := Resolve(path)
	if err != nil {
		return false
	}
	return exists(filepath.Join(dir, indexName)) || exists(filepath.Join(dir, singleWeights))
}

// openConfig resolves path and reads config.json and generation_config.json.
func openConfig(path string) (*Checkpoint, error) {
	dir, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	return openConfigs(dir)
}

// OpenDerived opens dir's config.json and generation_config.json as the
// model whose weights are the GGUF file at gguf: a llama.cpp file opened
// as a model by itself, whose metadata package ggufmodel translated into
// those files (and the tokenizer's) in dir. It has no safetensors shards;
// its Fingerprint is the GGUF file's sha256.
func OpenDerived(dir, gguf string) (*Checkpoint, error) {
	c, err := openConfigs(dir)
	if err != nil {
		return nil, err
	}
	c.GGUF = gguf
	c.tensors = map[string]*safetensors.File{}
	return c, nil
}

// openConfigs reads dir's config.json and generation_config.json.
func openConfigs(dir string) (*Checkpoint, error) {
	c := &Checkpoint{Dir: dir}
	cfgPath := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, pathError(err)
	}
	if c.Config, err = ParseConfig(data, cfgPath); err != nil {
		return nil, err
	}

	genPath := filepath.Join(dir, "generation_config.json")
	data, err = os.ReadFile(genPath)
	switch {
	case err == nil:
		if c.Generation, err = ParseGenerationConfig(data, genPath); err != nil {
			return nil, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, pathError(err)
	}
	return c, nil
}

// Source is the path the model was opened from, for messages: the GGUF
// file, else Dir.
func (c *Checkpoint) Source() string {
	if c.GGUF != "" {
		return c.GGUF
	}
	return c.Dir
}

// Names lists every tensor across shards, sorted.
func (c *Checkpoint) Names() []string {
	names := make([]string, 0, len(c.tensors))
	for name := range c.tensors {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Info locates a tensor and names the shard file that holds it (its full
// path, so it can be opened or read directly).
func (c *Checkpoint) Info(name string) (safetensors.TensorInfo, string, bool) {
	f, ok := c.tensors[name]
	if !ok {
		return safetensors.TensorInfo{}, "", false
	}
	info, _ := f.Info(name)
	return info, f.Path, true
}

func (c *Checkpoint) lookup(name string) (*safetensors.File, safetensors.TensorInfo, error) {
	f, ok := c.tensors[name]
	switch {
	case !ok && c.GGUF != "":
		return nil, safetensors.TensorInfo{}, fmt.Errorf("checkpoint: %s: no safetensors tensor %q: the weights are the GGUF file's", c.GGUF, name)
	case !ok:
		return nil, safetensors.TensorInfo{}, fmt.Errorf("checkpoint: %s: no tensor %q", c.Dir, name)
	}
	info, _ := f.Info(name)
	return f, info, nil
}

// Float32 decodes a tensor to float32 and returns its shape.
func (c *Checkpoint) Float32(name string) ([]float32, []int, error) {
	f, info, err := c.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	v, err := f.ReadFloat32(name)
	if err != nil {
		return nil, nil, err
	}
	return v, info.Shape, nil
}

// Raw returns a tensor's bytes as stored (any dtype) and its description,
// for uploads that convert on the device.
func (c *Checkpoint) Raw(name string) ([]byte, safetensors.TensorInfo, error) {
	f, info, err := c.lookup(name)
	if err != nil {
		return nil, info, err
	}
	b, err := f.ReadRaw(name)
	return b, info, err
}

// TokenizerPath is the path of tokenizer.json in the checkpoint directory.
func (c *Checkpoint) TokenizerPath() string { return filepath.Join(c.Dir, "tokenizer.json") }

// Close closes every shard.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.shards {
		errs = append(errs, f.Close())
	}
	c.shards, c.tensors = nil, nil
	return errors.Join(errs...)
}
