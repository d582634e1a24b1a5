package synth

import (
	"fmt"
	"os"
	"path/filepath"

	"logitscope/internal/format/sidecar"
	"logitscope/internal/sys/cachedir"
)

// generatorVersion names the generator's output: bump it whenever Write's
// bytes change, so that an old cached model is not mistaken for the new one.
const generatorVersion = "v2"

// Demo returns the directory of the built-in demo model: the tiny preset,
// seed 0.
func Demo() (string, error) { return Cached("tiny", 0) }

// Cached returns the directory of a preset's checkpoint with the built-in
// tokenizer, generating it on first use under $LOGITSCOPE_CACHE or the
// user's cache directory.
func Cached(preset string, seed uint64) (string, error) {
	p, ok := Presets[preset]
	if !ok {
		return "", fmt.Errorf("unknown preset %q", preset)
	}
	return CachedPreset(p, seed)
}

// CachedPreset is Cached for a preset that need not be in Presets (a
// TwoLayer cut), cached under its Name.
func CachedPreset(p Preset, seed uint64) (string, error) {
	preset := p.Name
	root, err := cachedir.Root("the demo model")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-seed%d-%s", preset, seed, generatorVersion))
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		// A checkpoint cached before Write added the sidecar, or with an
		// older one, gets Note's now, rather than a new generatorVersion
		// regenerating every cached preset (the large ones take minutes)
		// for one small file that no fingerprint covers.
		if n, err := sidecar.Read(dir); err != nil || n != Note(p, seed) {
			if err := sidecar.Write(dir, Note(p, seed)); err != nil {
				return "", err
			}
		}
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	// Generate beside the final place and rename: a concurrent or
	// interrupted first run never leaves a half-written demo behind.
	tmp, err := os.MkdirTemp(root, "."+preset+"-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := Write(p, tmp, Options{Seed: seed}); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it private
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "model.safetensors")); statErr == nil {
			return dir, nil // another process won the race
		}
		return "", err
	}
	return dir, nil
}
