// Package varianttest gives benchmarks a synthetic preset with a variant,
// written once into the cache and shared between runs and packages.
package varianttest

import (
	"os"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// Cached is the directory of preset p (synth.CachedPreset, seed 0) and
// of its variant of scheme s, each written once into the cache, with the
// quantizing's progress on stderr.
func Cached(tb testing.TB, p synth.Preset, s quant.Scheme) (dir, vdir string) {
	tb.Helper()
	dir, err := synth.CachedPreset(p, 0)
	if err != nil {
		tb.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer ck.Close()
	if vdir, err = variant.Ensure(ck, s, os.Stderr); err != nil {
		tb.Fatal(err)
	}
	return dir, vdir
}
