package onnxmodel_test

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/onnxmodel"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/varianttest"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/sys/prereq"
	"logitscope/internal/text/tokenizer"
)

// ortDir holds onnxruntime-web for Node.js (make deps).
const ortDir = "testdata/ort"

// prompt is the text whose tokens every case runs: a few dozen ids, more
// than one of the engine's chunks.
const prompt = "The quick brown fox jumps over the lazy dog, and then the dog sleeps again in the warm sun of the afternoon."

// TestORTFullRows exports each model to ONNX, runs the export on
// onnxruntime-web's wasm provider in Node.js over the prompt's ids and
// checks every position's full logit row against logitscope's CPU engine
// on the same weights: within 1e-5 of the largest |logit| (the runtimes'
// float32 summation orders differ; the weights do not: q4 matrices are
// MatMulNBits nodes holding the variant's codes and scales). The q4
// export is also checked to be far from the float reference's rows, so
// that the tolerance can tell the variant from the model it came from.
func TestORTFullRows(t *testing.T) {
	node := ortPrereq(t)
	for _, c := range []struct{ preset, scheme string }{
		{"tiny", "q4"},        // Qwen2: q/k/v biases, tied head (the embedding's q4 codes as the LM head)
		{"tiny-llama", "q4"},  // Llama: one KV head for four queries, its own head
		{"tiny-llama3", "q4"}, // Llama 3.2: rope_scaling llama3 (the tables hold its scaled frequencies)
		{"tiny", "f32"},       // the checkpoint's own weights: plain MatMuls
	} {
		t.Run(c.preset+"/"+c.scheme, func(t *testing.T) {
			ck, v := open(t, c.preset, c.scheme)
			ids := promptIDs(t, ck)
			path := filepath.Join(t.TempDir(), "model.onnx")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := onnxmodel.Export(f, ck, v, 128); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			theirs := runORT(t, node, path, ids)
			ours := engineRows(t, ck, v, ids)
			diff, scale := compare(t, ours, theirs)
			t.Logf("%d positions × %d logits: max |diff| %.3g, max |logit| %.3g, ratio %.2g", len(ids), len(ours[0]), diff, scale, diff/scale)
			if diff > 1e-5*scale {
				t.Fatalf("onnxruntime-web's rows differ from the engine's by %g (largest logit %g)", diff, scale)
			}
			if v != nil {
				ref, refScale := compare(t, engineRows(t, ck, nil, ids), theirs)
				t.Logf("the same rows against the float reference: max |diff| %.3g (ratio %.2g)", ref, ref/refScale)
				if ref <= 10*diff || ref <= 1e-5*refScale {
					t.Fatalf("the q4 export is as close to the float reference (%g) as to the q4 engine (%g): the check cannot tell them apart", ref, diff)
				}
			}
		})
	}
}

// ortPrereq is node, with onnxruntime-web installed beside the test.
func ortPrereq(t *testing.T) string {
	node, err := exec.LookPath("node")
	if err != nil {
		prereq.Missing(t, prereq.Node, "no node to run onnxruntime-web in")
	}
	if _, err := os.Stat(filepath.Join(ortDir, "node_modules", "onnxruntime-web", "package.json")); err != nil {
		prereq.Missing(t, prereq.Node, "onnxruntime-web is not installed (make deps): "+err.Error())
	}
	return node
}

// open is synthetic preset's checkpoint and its variant of scheme (nil
// for "f32"), each written once into the cache.
func open(t *testing.T, preset, scheme string) (*checkpoint.Checkpoint, *variant.Variant) {
	p := synth.Presets[preset]
	var dir, vdir string
	if scheme == "f32" {
		var err error
		if dir, err = synth.CachedPreset(p, 0); err != nil {
			t.Fatal(err)
		}
	} else {
		dir, vdir = varianttest.Cached(t, p, quant.Scheme(scheme))
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	if vdir == "" {
		return ck, nil
	}
	v, err := variant.Open(vdir)
	if err != nil {
		t.Fatal(err)
	}
	return ck, v
}

func promptIDs(t *testing.T, ck *checkpoint.Checkpoint) []int {
	tk, err := tokenizer.Load(filepath.Join(ck.Dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode(prompt)
	if len(ids) <= 32 {
		t.Fatalf("the prompt is %d tokens, want more than one chunk of 32", len(ids))
	}
	return ids
}

// runORT runs run.mjs on the export and returns its rows.
func runORT(t *testing.T, node, path string, ids []int) [][]float32 {
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.Itoa(id)
	}
	out := filepath.Join(t.TempDir(), "logits.f32")
	cmd := exec.Command(node, "run.mjs", path, strings.Join(list, ","), out)
	cmd.Dir = ortDir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("onnxruntime-web: %v\n%s", err, msg)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw)%(4*len(ids)) != 0 {
		t.Fatalf("onnxruntime-web wrote %d bytes for %d positions", len(raw), len(ids))
	}
	vocab := len(raw) / 4 / len(ids)
	rows := make([][]float32, len(ids))
	for i := range rows {
		rows[i] = make([]float32, vocab)
		for j := range rows[i] {
			rows[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(i*vocab+j):]))
		}
	}
	return rows
}

// engineRows is every position's logits from logitscope's CPU engine.
func engineRows(t *testing.T, ck *checkpoint.Checkpoint, v *variant.Variant, ids []int) [][]float32 {
	e, err := engine.Open(ck, engine.Options{Variant: v, Capacity: len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var rows [][]float32
	for lo := 0; lo < len(ids); lo += e.Chunk() {
		r, err := e.Submit(ids[lo:min(lo+e.Chunk(), len(ids))], engine.All)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Read(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range got {
			rows = append(rows, append([]float32(nil), row[:e.Vocab()]...))
		}
	}
	return rows
}

// compare is the largest |ours − theirs| over every row and the largest
// |ours|, after checking the shapes agree.
func compare(t *testing.T, ours, theirs [][]float32) (diff, scale float64) {
	if len(ours) != len(theirs) || len(ours[0]) != len(theirs[0]) {
		t.Fatalf("onnxruntime-web gave %d rows of %d logits, the engine %d of %d", len(theirs), len(theirs[0]), len(ours), len(ours[0]))
	}
	for i := range ours {
		for j, x := range ours[i] {
			diff = max(diff, math.Abs(float64(x-theirs[i][j])))
			scale = max(scale, math.Abs(float64(x)))
		}
	}
	return diff, scale
}
