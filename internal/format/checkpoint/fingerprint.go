package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Fingerprint identifies the model's numbers: the sha256 of the lines
// "<sha256 of file>  <file name>\n" for config.json and every weights
// shard, in name order. Tokenizer files are left out: they change which ids
// a text becomes, and receipts record the ids themselves.
// It is computed once: a capture needs it to verify a variant and again
// for its receipt, and it reads every weight byte.
//
// A model opened from a GGUF file (OpenDerived) is fingerprinted as the
// plain sha256 of that file: its metadata holds the config, so the file
// alone fixes the numbers, and the sum is the one `sha256sum` prints and
// model hubs list. The derived files are left out: they are a function of
// the file and of this program's version, not of the model.
func (c *Checkpoint) Fingerprint() (string, error) {
	if c.fp != "" {
		return c.fp, nil
	}
	sums, err := c.FileSums()
	if err != nil {
		return "", err
	}
	if c.GGUF != "" {
		c.fp = sums[0].SHA256
	} else {
		c.fp = FingerprintOf(sums)
	}
	return c.fp, nil
}

// FileSums is what Fingerprint hashes: config.json's sum, then every
// weights shard's in the order Open reads them; a model opened from a GGUF
// file has the file's alone. Computed once, with Fingerprint: an
// inventory of the files (package chain) needs the same sums.
func (c *Checkpoint) FileSums() ([]FileSum, error) {
	if c.sums != nil {
		return c.sums, nil
	}
	var files []string
	switch {
	case c.GGUF != "":
		files = []string{c.GGUF}
	case len(c.shards) == 0: // OpenWithoutWeights: Open refuses a model without shards
		return nil, fmt.Errorf("checkpoint: %s was opened without its weights: it has no fingerprint", c.Dir)
	default:
		files = []string{filepath.Join(c.Dir, "config.json")}
		for _, f := range c.shards {
			files = append(files, f.Path)
		}
	}
	sums := make([]FileSum, len(files))
	for i, path := range files {
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		sum, err := FileSHA256(path)
		if err != nil {
			return nil, err
		}
		sums[i] = FileSum{Name: filepath.Base(path), SHA256: sum, Bytes: st.Size()}
	}
	c.sums = sums
	return sums, nil
}

// IndexPath is model.safetensors.index.json's path when the weights were
// opened through one, else "".
func (c *Checkpoint) IndexPath() string {
	p := filepath.Join(c.Dir, indexName)
	if c.GGUF != "" || len(c.shards) == 0 || !exists(p) {
		return ""
	}
	return p
}

// FileSum is a file's name and the hex sha256 of its bytes.
type FileSum struct {
	Name, SHA256 string
	Bytes        int64 // its size; FingerprintOf does not use it
}

// FingerprintOf is the Fingerprint of a checkpoint whose config.json and
// weights shards have these sums: config.json first, then the shards in
// the order Open reads them (model.safetensors, or the index's files in
// name order). The page fingerprints a folder it reads from the user's
// disk with it, hashing the files itself.
func FingerprintOf(files []FileSum) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s  %s\n", f.SHA256, f.Name)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FileSHA256 is the hex sha256 of a file's bytes.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
