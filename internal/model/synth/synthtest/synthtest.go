// Package synthtest gives tests a synthetic checkpoint of their own.
package synthtest

import (
	"path/filepath"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/synth"
)

// Checkpoint writes preset p with seed into a temporary directory named
// after it and opens it, closed when the test ends.
func Checkpoint(tb testing.TB, p synth.Preset, seed uint64) *checkpoint.Checkpoint {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), p.Name)
	if err := synth.Write(p, dir, synth.Options{Seed: seed}); err != nil {
		tb.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ck.Close() })
	return ck
}
