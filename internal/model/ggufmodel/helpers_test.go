package ggufmodel_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/synthtest"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/session"
	"logitscope/internal/text/tokenizer"
)

// checkpointOf writes preset (seed 0) to a temporary directory.
func checkpointOf(t testing.TB, preset string) *checkpoint.Checkpoint {
	t.Helper()
	return synthtest.Checkpoint(t, synth.Presets[preset], 0)
}

// export writes ck (scheme "f32") or its variant of scheme, quantized
// first, as GGUF.
func export(t testing.TB, ck *checkpoint.Checkpoint, scheme string) (string, *variant.Variant, *ggufmodel.Exported) {
	t.Helper()
	var v *variant.Variant
	if scheme != "f32" {
		dir, err := variant.Ensure(ck, quant.Scheme(scheme), nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, err = variant.Open(dir); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), filepath.Base(ck.Dir)+"-"+scheme+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e, err := ggufmodel.Export(f, ck, v)
	if err != nil {
		t.Fatal(err)
	}
	return path, v, e
}

// exportFile is export's path alone.
func exportFile(t testing.TB, ck *checkpoint.Checkpoint, scheme string) string {
	t.Helper()
	path, _, _ := export(t, ck, scheme)
	return path
}

// edit changes a GGUF's metadata and tensors in rewrite.
type edit func(kv []gguf.KV, tensors []gguf.Tensor) ([]gguf.KV, []gguf.Tensor)

// rewrite copies the GGUF at path with its metadata and tensors edited.
func rewrite(t testing.TB, path string, fn edit) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var tensors []gguf.Tensor
	for _, info := range f.Tensors {
		data, err := f.ReadTensor(info)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.Tensor{Name: info.Name, Dims: slices.Clone(info.Dims), Type: info.Type, Data: data})
	}
	kv, tensors := fn(slices.Clone(f.KV), tensors)
	out := filepath.Join(t.TempDir(), "edited-"+filepath.Base(path))
	o, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := gguf.Write(o, kv, tensors, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

// setKV replaces key's value (or adds it).
func setKV(key string, v gguf.Value) edit {
	return func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
		for i := range kv {
			if kv[i].Key == key {
				kv[i].Value = v
				return kv, ts
			}
		}
		return append(kv, gguf.KV{Key: key, Value: v}), ts
	}
}

// editTensor applies fn to the tensor named name.
func editTensor(name string, fn func(*gguf.Tensor)) edit {
	return func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
		for i := range ts {
			if ts[i].Name == name {
				fn(&ts[i])
			}
		}
		return kv, ts
	}
}

// dequantizedCopy writes path's tensors dequantized to F32 (ggml's own
// values, through ggml.Dequantize) with the same metadata.
func dequantizedCopy(t testing.TB, path string) string {
	t.Helper()
	return rewrite(t, path, func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
		for i := range ts {
			n := 1
			for _, d := range ts[i].Dims {
				n *= int(d)
			}
			x := make([]float32, n)
			if err := ggml.Dequantize(ts[i].Type, ts[i].Data, x); err != nil {
				t.Fatal(err)
			}
			ts[i].Type, ts[i].Data = ggml.F32, safetensors.EncodeF32(x)
		}
		return setKV("general.file_type", gguf.Uint32Value(0))(kv, ts)
	})
}

// panelIDs is the first n tokens of the synthetic corpus.
func panelIDs(t testing.TB, ck *checkpoint.Checkpoint, n int) []int {
	t.Helper()
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("../synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	return tok.Encode(string(text))[:n]
}

// rowsOf runs ids teacher-forced on the CPU engine: the checkpoint's own
// float weights when path is "", else the GGUF's. Row i predicts ids[i+1].
func rowsOf(t testing.TB, ck *checkpoint.Checkpoint, path string, ids []int) [][]float32 {
	t.Helper()
	return rowsWith(t, ck, path, ids, engine.ActsF32)
}

// rowsWith is rowsOf with the engine's products taking activations as
// acts says (engine.Options.Activations).
func rowsWith(t testing.TB, ck *checkpoint.Checkpoint, path string, ids []int, acts string) [][]float32 {
	t.Helper()
	opt := engine.Options{Capacity: len(ids), Activations: acts}
	if path != "" {
		w, err := engine.OpenGGUF(ck, path)
		if err != nil {
			t.Fatal(err)
		}
		opt.GGUF = w
	}
	e, err := engine.Open(ck, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := session.Drive(e, session.Request{Mode: session.Panel, Windows: [][]int{ids}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Rows
}

// logits is rows as a dump of vocab-wide rows.
func logits(rows [][]float32, vocab int) *dump.Logits {
	l := &dump.Logits{Rows: len(rows), Vocab: vocab}
	for _, r := range rows {
		l.Data = append(l.Data, r[:vocab]...)
	}
	return l
}

// agreement compares rows (logitscope's) with llama.cpp's on the same
// positions: the largest difference relative to the row's largest |logit|,
// and how many rows pick another argmax.
func agreement(ours, theirs [][]float32) (maxRel float64, flips int) {
	for i, a := range ours {
		top := 0.0
		for _, v := range a {
			top = max(top, math.Abs(float64(v)))
		}
		maxRel = max(maxRel, maxDiff(a, theirs[i])/top)
		if session.Argmax(a) != session.Argmax(theirs[i]) {
			flips++
		}
	}
	return maxRel, flips
}

// checkTop1 requires the same argmax on both sides wherever the top-1 to
// top-2 margin exceeds twice the row's largest difference, the most that
// difference could move it.
func checkTop1(t testing.TB, name string, ours, theirs [][]float32) {
	t.Helper()
	for i, a := range ours {
		if m := margin(a); session.Argmax(a) != session.Argmax(theirs[i]) && m > 2*maxDiff(a, theirs[i]) {
			t.Errorf("%s row %d: argmax %d here, %d in llama.cpp, with a margin of %.3g", name, i, session.Argmax(a), session.Argmax(theirs[i]), m)
		}
	}
}

// margin is a row's top-1 minus top-2 logit.
func margin(row []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range row {
		switch x := float64(v); {
		case x > a:
			a, b = x, a
		case x > b:
			b = x
		}
	}
	return a - b
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// typeMix names a GGUF by its type mix, for logs.
func typeMix(t testing.TB, ck *checkpoint.Checkpoint, path string) string {
	t.Helper()
	w, err := engine.OpenGGUF(ck, path)
	if err != nil {
		t.Fatal(err)
	}
	return w.TypeMix()
}
