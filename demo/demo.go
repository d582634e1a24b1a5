// Package demo holds logitscope's demo model: a small Llama trained on the
// King James Bible by demo/train/train.py, with its own byte-level BPE
// tokenizer. Its files are embedded so that `make run` (and `go run
// ./cmd/serve` from anywhere) needs nothing but Go; Dir writes them out
// once, where variants can be quantized beside them.
package demo

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"logitscope/internal/sys/cachedir"
)

// The files by name, not the folder: variants quantized into demo/model by
// hand must not end up inside every binary.
//
//go:embed model/config.json model/generation_config.json model/model.safetensors
//go:embed model/tokenizer.json model/tokenizer_config.json model/logitscope.json
var files embed.FS

// Files is the model directory as committed: config.json,
// generation_config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json and the logitscope.json sidecar.
func Files() fs.FS {
	sub, err := fs.Sub(files, "model")
	if err != nil {
		panic(err) // "model" is embedded above
	}
	return sub
}

// Dir returns a directory holding the demo model's files, written on first
// use under $LOGITSCOPE_CACHE or the user's cache directory. The folder is
// named by the files' sha256, so a retrained model never meets the
// variants quantized from its predecessor.
func Dir() (string, error) {
	root, err := cachedir.Root("the demo model")
	if err != nil {
		return "", err
	}
	sum, err := digest(Files())
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "demo-kjv-"+sum[:12])
	err = cachedir.Fill(dir, "model.safetensors", func(tmp string) error {
		if err := os.CopyFS(tmp, Files()); err != nil {
			return fmt.Errorf("demo model: %w", err)
		}
		return nil
	})
	return dir, err
}

// digest is the sha256 over every file's name and contents, in fs.WalkDir's
// (lexical) order.
func digest(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
