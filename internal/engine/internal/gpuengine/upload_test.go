package gpuengine

import (
	"path/filepath"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/internal/model/synth"
)

// Upload progress ends exactly at its total, so the terminal line closes
// (a mixture of experts counts each expert matrix once, banked or not).
func TestUploadProgress(t *testing.T) {
	for _, p := range []synth.Preset{synth.Presets["tiny"], synth.Presets["tiny-llama"], synth.Presets["tiny-qwen3"], synth.Presets["tiny-qwen2-moe"]} {
		dev := nativetest.Device(t)
		dir := filepath.Join(t.TempDir(), p.Name)
		if err := synth.Write(p, dir, synth.Options{}); err != nil {
			t.Fatal(err)
		}
		ck, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		g, _ := model.GeometryOf(ck.Config)
		var last, total int64
		e, err := New(dev, g, CheckpointSource(ck), Options{Capacity: 4, Progress: func(d, n int64) { last, total = d, n }})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		if last != total || total != int64(len(g.Specs())) {
			t.Errorf("%s: progress ended at %d of %d, want %d of %d", p.Name, last, total, len(g.Specs()), len(g.Specs()))
		}
	}
}
