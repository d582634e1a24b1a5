package ggufmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model"
	"logitscope/internal/sys/cachedir"
)

// OpenModel opens the GGUF file at path as a model by itself, where a
// Hugging Face checkpoint directory would be: its metadata translated
// (Config, TokenizerFiles) into config.json, generation_config.json,
// tokenizer.json and tokenizer_config.json in a cache directory, opened
// as a checkpoint whose weights are the file (checkpoint.OpenDerived),
// after Open has checked that the file's tensors are that model's.
//
// The cache directory is named by the sha256 of the four derived files.
// Deriving reads only the file's header, so it runs on every open (0.5
// to 0.8 s for Qwen3's or Llama 3.1's vocabulary of 150,000 tokens on a
// shared 2-core machine, about what loading the resulting tokenizer
// costs; parsing the new files as a check, 1 to 2 s more, runs only when
// they are not cached yet), and naming the result by its own bytes means that a file replaced in
// place, the same file under two paths, or a logitscope that derives
// differently never meets stale files; a key from the GGUF's own
// identity would have to trust a modification time (path, size, mtime)
// or hash gigabytes of weights on every open (its sha256, which the
// checkpoint's Fingerprint computes only when a receipt needs it).
func OpenModel(path string) (*checkpoint.Checkpoint, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	d, err := configFiles(f)
	if err != nil {
		return nil, err
	}
	tok, tokCfg, err := tokenizerFiles(f)
	if err != nil {
		return nil, err
	}
	files := []derived{
		{"config.json", d.cfg}, {"generation_config.json", d.gen},
		{"tokenizer.json", tok}, {"tokenizer_config.json", tokCfg},
	}
	dir, err := cacheDir(files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A directory named by the files' own bytes holds files that passed
	// the check when they were written: only new ones need it.
	made := false
	if _, err := os.Stat(dir); err != nil {
		if err := checkTokenizerFiles(f, tok, tokCfg); err != nil {
			return nil, err
		}
		err := cachedir.Fill(dir, files[0].name, func(tmp string) error {
			for _, f := range files {
				if err := os.WriteFile(filepath.Join(tmp, f.name), f.data, 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: caching the files derived from its metadata: %w", path, err)
		}
		made = true
	}
	ck, err := openDerived(dir, path)
	if err != nil && made {
		os.RemoveAll(dir) // a refused file leaves nothing in the cache
	}
	return ck, err
}

// openDerived opens the checkpoint of the files derived from the GGUF at
// path, once its weights are checked against them.
func openDerived(dir, path string) (*checkpoint.Checkpoint, error) {
	ck, err := checkpoint.OpenDerived(dir, path)
	if err != nil {
		return nil, err
	}
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	} else {
		_, err = Open(path, g) // its errors name the file
	}
	if err != nil {
		ck.Close()
		return nil, err
	}
	return ck, nil
}

// derived is one file written for a GGUF model.
type derived struct {
	name string
	data []byte
}

// cacheDir is where files are cached: gguf/<sha256 of them> under
// $LOGITSCOPE_CACHE or the user's cache directory.
func cacheDir(files []derived) (string, error) {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s %d\n", f.name, len(f.data))
		h.Write(f.data)
	}
	root, err := cachedir.Root("the files derived from its metadata")
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "gguf", hex.EncodeToString(h.Sum(nil))[:32]), nil
}
