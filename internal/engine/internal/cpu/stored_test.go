package cpu

import (
	"testing"

	"logitscope/internal/model"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
)

// quantized returns two copies of m: every matrix quantized to s and held
// as stored (one piece), and the same values decoded to float32.
func quantized(t *testing.T, m *model.Model, s quant.Scheme) (stored, float *model.Model) {
	t.Helper()
	stored, float = copyModel(m), copyModel(m)
	done := map[*model.Matrix][2]*model.Matrix{}
	sp, fp := matrices(stored), matrices(float)
	for i, p := range matrices(m) {
		W := *p
		if _, ok := done[W]; !ok {
			blob, err := quant.Quantize(s, W.Data, W.Rows, W.Cols)
			if err != nil {
				t.Fatal(err)
			}
			values := make([]float32, len(W.Data))
			if err := quant.Dequantize(s, blob, W.Rows, W.Cols, values); err != nil {
				t.Fatal(err)
			}
			done[W] = [2]*model.Matrix{
				{Rows: W.Rows, Cols: W.Cols, Pieces: []model.Piece{{Rows: W.Rows, Format: model.Format{Scheme: s}, Data: blob}}},
				{Rows: W.Rows, Cols: W.Cols, Data: values},
			}
		}
		*sp[i], *fp[i] = done[W][0], done[W][1]
	}
	return stored, float
}

// copyModel copies m's layers and experts, so that matrices(copy) can be
// replaced without touching m.
func copyModel(m *model.Model) *model.Model {
	c := *m
	c.Layers = append([]model.Layer(nil), m.Layers...)
	for i := range c.Layers {
		L := &c.Layers[i]
		L.Experts = append([]model.Expert(nil), L.Experts...)
		if L.Shared != nil {
			shared := *L.Shared
			L.Shared = &shared
		}
	}
	return &c
}

// matrices points at every matrix field of m (a tied head twice).
func matrices(m *model.Model) []**model.Matrix {
	out := []**model.Matrix{&m.Embed, &m.Head}
	mlp := func(e *model.Expert) { out = append(out, &e.Wgate, &e.Wup, &e.Wdown) }
	for i := range m.Layers {
		L := &m.Layers[i]
		out = append(out, &L.Wq, &L.Wk, &L.Wv, &L.Wo)
		if L.Router == nil {
			out = append(out, &L.Wgate, &L.Wup, &L.Wdown)
			continue
		}
		out = append(out, &L.Router)
		for e := range L.Experts {
			mlp(&L.Experts[e])
		}
		if L.Shared != nil {
			mlp(L.Shared)
		}
		if L.SharedGate != nil { // Qwen2-MoE's; GLM's shared experts have none
			out = append(out, &L.SharedGate)
		}
	}
	return out
}

// A model held as stored q8 or q4 gives the very logits of its values
// held as float32, on the assembly and the pure-Go kernels alike (which
// engine.wasm runs), and its KV-cache decode equals its teacher forcing.
func TestStoredForward(t *testing.T) {
	type job struct {
		p synth.Preset
		s quant.Scheme
	}
	var jobs []job
	for _, p := range synth.Tiny() {
		jobs = append(jobs, job{p, quant.Q8}, job{p, quant.Q4})
	}
	jobs = append(jobs, job{synth.TwoLayer("qwen2.5-0.5b"), quant.Q4}) // real widths: 20 s of pure Go
	for _, r := range jobs {
		t.Run(r.p.Name+"/"+string(r.s), func(t *testing.T) {
			stored, float := quantized(t, load(t, r.p), r.s)
			ids := sequence(20, stored.Vocab)
			run := func(m *model.Model, decode bool) [][]float32 {
				st, err := New(m, len(ids))
				if err != nil {
					t.Fatal(err)
				}
				if !decode {
					rows, err := st.Forward(ids, true)
					if err != nil {
						t.Fatal(err)
					}
					return rows
				}
				rows, err := st.Forward(ids[:7], true)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids[7:] {
					r, err := st.Forward([]int{id}, false)
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, r...)
				}
				return rows
			}
			want := run(float, false)
			for _, path := range kernelPaths() {
				onPath(path, func() {
					for _, c := range []struct {
						what string
						rows [][]float32
					}{
						{"stored, teacher forced", run(stored, false)},
						{"stored, KV-cache decode", run(stored, true)},
						{"float32, KV-cache decode", run(float, true)},
					} {
						for i := range want {
							sameBits(t, c.what+" ("+path+")", c.rows[i], want[i])
						}
					}
				})
			}
		})
	}
}
