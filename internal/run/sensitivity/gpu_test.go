package sensitivity

import (
	"math"
	"testing"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// The same sweep on the device (the WGSL program, as a GPU capture runs
// it) ranks the units as the CPU's does: the rescaled down_proj first,
// every unit's forward KLD within 2 % of the CPU's, the same clear calls
// and the same first culprit of each. The device's sweep has no layer
// boundaries, so it recomputes every run from the embeddings, and no
// divergence by layer.
func TestGPUSweepRanksAsTheCPU(t *testing.T) {
	dev := nativetest.Device(t)
	dir := rescaled(t)
	cpuX := mix(t, dir, quant.Q4)
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	v, err := variant.Open(variant.DefaultDir(dir, "q4"))
	if err != nil {
		t.Fatal(err)
	}
	gpuX, err := engine.OpenMix(ck, engine.Options{Variant: v, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer gpuX.Close()
	windows := panel(t, dir, 48)[:1]
	units, err := Units(cpuX.Changed(), cpuX.Geometry().NumLayers, attribution.ByTensor)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Unit: attribution.ByTensor}
	want, err := Sweep(cpuX, windows, units, opt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Sweep(gpuX, windows, units, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s against cpu: whole KLD %.6f against %.6f", got.Device, got.Whole.MeanKLD, want.Whole.MeanKLD)
	if got.Units[0].Name != culprit || want.Units[0].Name != culprit {
		t.Errorf("first: %s on the device, %s on the CPU", got.Units[0].Name, want.Units[0].Name)
	}
	kld := map[string]float64{}
	for _, u := range want.Units {
		kld[u.Name] = u.Forward.MeanKLD
	}
	for _, u := range got.Units {
		if w := kld[u.Name]; math.Abs(u.Forward.MeanKLD-w) > 0.02*w+1e-6 {
			t.Errorf("%s: forward KLD %.6g on the device, %.6g on the CPU", u.Name, u.Forward.MeanKLD, w)
		}
	}
	if len(want.Calls) == 0 || len(got.Calls) != len(want.Calls) {
		t.Fatalf("%d clear calls on the device, %d on the CPU", len(got.Calls), len(want.Calls))
	}
	for i := range got.Calls {
		if g, w := got.Calls[i].Culprits[0], want.Calls[i].Culprits[0]; g.Unit != w.Unit || g.Undoes != w.Undoes {
			t.Errorf("clear call %d: first culprit %+v on the device, %+v on the CPU", i, g, w)
		}
	}
	if len(got.Layers) != 0 || got.Device == "cpu" {
		t.Errorf("the device's sweep: %d layers of divergence, device %q", len(got.Layers), got.Device)
	}
	if _, err := Sweep(gpuX, windows, units, Options{Unit: attribution.ByTensor, Controls: true}); err == nil {
		t.Error("controls on the device were taken")
	}
}
