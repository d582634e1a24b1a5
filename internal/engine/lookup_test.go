package engine_test

import (
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/internal/model/quantizedtest"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/synthtest"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/session"
)

// quantizedOf is preset (seed 3) with its matrices as random lookup
// matrices (quantizedtest.Random), and the float checkpoint of their
// decoded weights.
func quantizedOf(t *testing.T, preset string) (*checkpoint.Checkpoint, *quantizedtest.Quantized, *checkpoint.Checkpoint) {
	t.Helper()
	ck := synthtest.Checkpoint(t, synth.Presets[preset], 3)
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	q := quantizedtest.Random(g, model.CheckpointWeights(ck), 5)
	if len(q.Lookups) == 0 {
		t.Fatal("no matrix to look up")
	}
	dir := filepath.Join(t.TempDir(), preset+"-decoded")
	if err := quantizedtest.WriteFloat(q, ck, dir); err != nil {
		t.Fatal(err)
	}
	ref, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	return ck, q, ref
}

// A hub quantization's weights run as lookup matrices give the logits of
// the float checkpoint of their decoded weights on the CPU (an
// independent reference: the checkpoint engine never sees a lookup
// matrix), and the GPU (in pieces of 16 KiB) gives the CPU's, with
// float32 activations and with each matrix's declared activation
// quantization (int8, fp8, fp4), which moves the logits off the float
// ones. The tied head of tiny and tiny-qwen3 is the looked-up embedding;
// tiny-qwen3-moe's experts are lookup matrices one by one.
func TestQuantizedMatchesFloat(t *testing.T) {
	dev := nativetest.Device(t)
	for _, preset := range []string{"tiny", "tiny-qwen3", "tiny-qwen3-moe"} {
		t.Run(preset, func(t *testing.T) {
			ck, q, ref := quantizedOf(t, preset)
			open := func(ck *checkpoint.Checkpoint, opt engine.Options) engine.Engine {
				opt.Capacity, opt.MaxPieceBytes = 64, 16<<10
				e, err := engine.Open(ck, opt)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(e.Close)
				return e
			}
			ids := probeIDs(40)
			forward := func(e engine.Engine) [][]float32 {
				rows, err := session.Forward(e, ids, true)
				if err != nil {
					t.Fatal(err)
				}
				return rows
			}
			float := open(ref, engine.Options{})
			want, V := forward(float), float.Vocab()
			for _, acts := range []string{"", engine.ActsFormat} {
				var rows [2][][]float32
				for i, d := range []gpu.Device{nil, dev} {
					rows[i] = forward(open(ck, engine.Options{Quantized: q, Device: d, Activations: acts}))
				}
				// With rounded activations a mixture may route a token
				// elsewhere than the float checkpoint (err).
				_, vsFloat, routed := gpuError(want, rows[0], V)
				if routed != nil && acts == "" {
					t.Fatal(routed)
				}
				worst, vsCPU, err := gpuError(rows[0], rows[1], V)
				if err != nil {
					t.Fatal(err)
				}
				if routed != nil {
					t.Logf("%s activations %q: the CPU routes unlike the decoded float checkpoint (%v)", preset, acts, routed)
				}
				t.Logf("%s activations %q: CPU off the decoded float checkpoint by %.2e, GPU off the CPU by %.2e (%.2e logits) of the row's largest", preset, acts, vsFloat, vsCPU, worst)
				switch {
				case acts == "" && vsFloat > ForwardTolerance:
					t.Errorf("the CPU's logits differ from the decoded checkpoint's by %g of the row's largest", vsFloat)
				case acts != "" && routed == nil && vsFloat <= ForwardTolerance:
					t.Errorf("rounding the activations moved the logits by only %g of the row's largest", vsFloat)
				}
				if vsCPU > ForwardTolerance {
					t.Errorf("activations %q: the GPU's logits differ from the CPU's by %g of the row's largest", acts, vsCPU)
				}
			}
		})
	}
}

// Open refuses a hub quantization with another kind of weights, and its
// activation quantizations without one, naming them; a mix refuses it.
func TestQuantizedRefusals(t *testing.T) {
	ck, q, _ := quantizedOf(t, "tiny")
	v := synthVariant(t, ck)
	for _, c := range []struct {
		opt  engine.Options
		want string
	}{
		{engine.Options{Quantized: q, Variant: v}, "not several"},
		{engine.Options{Activations: engine.ActsInt8}, "hub quantization"},
		{engine.Options{Quantized: q, Activations: "int4"}, `activations "int4"`},
	} {
		c.opt.Capacity = 8
		if _, err := engine.Open(ck, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.opt.Activations, err, c.want)
		}
	}
	if _, err := engine.OpenMix(ck, engine.Options{Quantized: q, Variant: v}); err == nil || !strings.Contains(err.Error(), "hub quantization") {
		t.Errorf("a mix of a hub quantization: %v", err)
	}
}

// synthVariant is ck's q4 variant.
func synthVariant(t *testing.T, ck *checkpoint.Checkpoint) *variant.Variant {
	t.Helper()
	if err := variant.Write(ck, quant.Q4, variant.DefaultDir(ck.Dir, "q4"), variant.Options{}); err != nil {
		t.Fatal(err)
	}
	v, err := engine.OpenVariant(ck, "q4")
	if err != nil {
		t.Fatal(err)
	}
	return v
}
