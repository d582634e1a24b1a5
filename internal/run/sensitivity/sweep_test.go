package sensitivity

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/demo"
	"logitscope/internal/analysis/attribution"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/text/tokenizer"
)

const culprit = "model.layers.1.mlp.down_proj.weight"

// rescaled copies the trained demo model with layer 1's MLP rescaled
// channel by channel: the first column of each quantization group of
// down_proj times 2¹⁰ and the matching row of up_proj divided by it. The
// float model computes the same bits (a power of two scales exactly, in
// bf16 and in every product), but each group's scale now serves one
// outlier: q4 rounds the other 31 columns to nothing.
func rescaled(t testing.TB) string {
	t.Helper()
	dir := demoCopy(t)
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var tensors []safetensors.Tensor
	for _, info := range f.Tensors() {
		v, err := f.ReadFloat32(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		switch info.Name {
		case "model.layers.1.mlp.up_proj.weight": // (ff, d): row j
			for j := 0; j < info.Shape[0]; j += quant.GroupSize {
				for c := range info.Shape[1] {
					v[j*info.Shape[1]+c] /= 1 << 10
				}
			}
		case culprit: // (d, ff): column j
			for r := range info.Shape[0] {
				for j := 0; j < info.Shape[1]; j += quant.GroupSize {
					v[r*info.Shape[1]+j] *= 1 << 10
				}
			}
		}
		if info.DType != safetensors.BF16 {
			t.Fatalf("%s is %s: the rescale is exact in bf16", info.Name, info.DType)
		}
		tensors = append(tensors, safetensors.Tensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: safetensors.EncodeBF16(v)})
	}
	f.Close()
	if err := safetensors.WriteFile(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// demoCopy is a copy of the trained demo model, where variants can be
// written.
func demoCopy(t testing.TB) string {
	t.Helper()
	src, err := demo.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "demo")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// panel is the demo's own panel text in windows of n tokens after BOS.
func panel(t testing.TB, dir string, n int) [][]int {
	t.Helper()
	var note struct{ Panel string }
	data, err := os.ReadFile(filepath.Join(dir, "logitscope.json"))
	if err == nil {
		err = json.Unmarshal(data, &note)
	}
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	bos, _ := tok.BOS()
	ids := tok.Encode(strings.Repeat(note.Panel+" ", 2))
	var windows [][]int
	for a := 0; a+n < len(ids); a += n {
		windows = append(windows, append([]int{bos}, ids[a:a+n]...))
	}
	return windows
}

// mix opens dir's checkpoint against a variant of scheme written beside it.
func mix(t testing.TB, dir string, scheme quant.Scheme) *engine.Mix {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	out := variant.DefaultDir(dir, string(scheme))
	if err := variant.Write(ck, scheme, out, variant.Options{}); err != nil {
		t.Fatal(err)
	}
	return mixOf(t, ck, out)
}

// mixOf opens ck against the variant in dir.
func mixOf(t testing.TB, ck *checkpoint.Checkpoint, dir string) *engine.Mix {
	t.Helper()
	v, err := variant.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	x, err := engine.OpenMix(ck, engine.Options{Variant: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}

// The rescaled down_proj is the one tensor the sweep blames: first in the
// forward sweep, by far; first culprit of every clear call, undoing it
// alone; and its isotropic control, the same error norm in no particular
// direction, is what the real error is compared with. The float model is
// bit for bit the demo's.
func TestSweepFindsTheRescaledTensor(t *testing.T) {
	dir := rescaled(t)
	x := mix(t, dir, quant.Q4)
	windows := panel(t, dir, 48)

	y := mix(t, demoCopy(t), quant.Q8)
	for _, w := range windows {
		a, err := x.Run(w, engine.Choice{}, 0, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		a = slices.Clone(a)
		b, err := y.Run(w, engine.Choice{}, 0, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a, b) {
			t.Fatal("the rescaled float model's logits differ from the demo's")
		}
	}

	units, err := Units(x.Changed(), x.Geometry().NumLayers, attribution.ByTensor)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 29 {
		t.Errorf("%d units, want 28 matrices in 4 layers and the tied embedding", len(units))
	}
	res, err := Sweep(x, windows, units, Options{Unit: attribution.ByTensor, Controls: true})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := res.WriteText(&text, 8, nil); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	top, next := res.Units[0], res.Units[1]
	if top.Name != culprit {
		t.Fatalf("the forward sweep ranks %s first, want %s", top.Name, culprit)
	}
	if top.Forward.MeanKLD < 10*next.Forward.MeanKLD {
		t.Errorf("%s's mean KLD %.4g is not 10× the next unit's (%s, %.4g)", culprit, top.Forward.MeanKLD, next.Name, next.Forward.MeanKLD)
	}
	if top.Iso == nil || top.Forward.MeanKLD < 2*top.Iso.MeanKLD {
		t.Errorf("%s: the real error (KLD %.4g) does not hurt more than isotropic noise of its norm (%+v)", culprit, top.Forward.MeanKLD, top.Iso)
	}
	if len(res.Calls) == 0 || res.Whole.Clear != len(res.Calls) {
		t.Fatalf("%d clear calls listed, the whole test has %d", len(res.Calls), res.Whole.Clear)
	}
	for _, c := range res.Calls {
		if s := c.Culprits[0]; s.Unit != culprit || !s.Undoes || s.Share < 0.5 {
			t.Errorf("clear call at %d: first culprit %+v, want %s undoing it", c.Index, s, culprit)
		}
	}
	if res.Floor == nil || res.Floor.MeanKLD <= 0 || res.Floor.MeanKLD > res.Whole.MeanKLD/100 {
		t.Errorf("noise floor %+v against the whole test's %+v", res.Floor, res.Whole)
	}
	if f := res.Additivity.Forward; !(f > 0.5 && f < 1.5) {
		t.Errorf("forward additivity %.3f", f)
	}
	if res.Start != 1 {
		t.Errorf("the divergence starts at layer %d, want 1: %+v", res.Start, res.Layers)
	}
}

// A sweep stopped by a failure keeps the windows it finished, and one
// started again with the same key goes on from them to the same result;
// a state of another key is refused.
func TestSweepResumes(t *testing.T) {
	dir := demoCopy(t)
	x := mix(t, dir, quant.Q4)
	windows := panel(t, dir, 24)[:3]
	units, err := Units(x.Changed(), x.Geometry().NumLayers, attribution.ByLayer)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 5 {
		t.Fatalf("%d units by layer, want 4 layers and the embedding: %+v", len(units), units)
	}
	opt := Options{Unit: attribution.ByLayer, Key: "k"}
	want, err := Sweep(x, windows, units, opt)
	if err != nil {
		t.Fatal(err)
	}

	opt.Resume = filepath.Join(t.TempDir(), "sweep.partial")
	broken := slices.Clone(windows)
	broken[1] = []int{1, x.Geometry().Vocab + 5}
	if _, err := Sweep(x, broken, units, opt); err == nil || !strings.Contains(err.Error(), "window 2") {
		t.Fatalf("a window out of the vocabulary: %v", err)
	}
	var st state
	data, err := os.ReadFile(opt.Resume)
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil || st.Done != 1 {
		t.Fatalf("the state after the failure: %d windows done, %v", st.Done, err)
	}
	if _, err := Sweep(x, windows, units, Options{Unit: attribution.ByLayer, Key: "other", Resume: opt.Resume}); err == nil {
		t.Error("a state of another key was taken")
	}
	var seen []int
	opt.Progress = func(done, total int) { seen = append(seen, done) }
	got, err := Sweep(x, windows, units, opt)
	if err != nil {
		t.Fatal(err)
	}
	if runs := 2 + 2*len(units); !slices.Equal(seen, []int{2 * runs, 3 * runs}) {
		t.Errorf("progress %v: the resumed sweep ran windows it had", seen)
	}
	a, _ := want.Marshal()
	b, _ := got.Marshal()
	if string(a) != string(b) {
		t.Errorf("the resumed sweep differs from the whole one")
	}
	if _, err := os.Stat(opt.Resume); !os.IsNotExist(err) {
		t.Errorf("the state is left after the sweep: %v", err)
	}
}
