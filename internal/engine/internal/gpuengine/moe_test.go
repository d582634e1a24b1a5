package gpuengine

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// Where the experts lie does not change a bit of the result: each output
// row is the same arithmetic in whichever bank its weights are. On
// tiny-qwen3-moe (experts' gate (48, 64)): the bf16 checkpoint with every
// expert in one bank, two per bank (16 KiB: a bf16 gate is 6 KiB), and
// each expert cut into row-pieces of 32 and 16 rows (4 KiB), one expert's
// first piece per bank and two experts' second pieces; the q4 variant
// (written in pieces of at most 2 KiB) in one bank and in banks of two
// experts (its gate is 1728 bytes); a variant that quantizes half the
// experts in two banks, one per format.
func TestExpertBanks(t *testing.T) {
	dev := nativetest.Device(t)
	dir := filepath.Join(t.TempDir(), "tiny-qwen3-moe")
	if err := synth.Write(synth.Presets["tiny-qwen3-moe"], dir, synth.Options{Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	vdir := variant.DefaultDir(dir, "q4")
	if err := variant.Write(ck, quant.Q4, vdir, variant.Options{MaxShardBytes: 2 << 10}); err != nil {
		t.Fatal(err)
	}
	v, err := variant.Open(vdir)
	if err != nil {
		t.Fatal(err)
	}
	// Experts 0–3 in q4, 4–7 kept in float32: a bank per format.
	mdir := filepath.Join(dir, "variants", "q4-experts-0-3")
	if err := variant.Write(ck, quant.Q4, mdir, variant.Options{Policy: &variant.Policy{Only: `mlp\.experts\.[0-3]\.`}, MaxShardBytes: 16 << 10}); err != nil {
		t.Fatal(err)
	}
	mixed, err := variant.Open(mdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		src   Source
		max   []int64 // MaxPieceBytes, the first one the reference
		banks []int   // banks of each layer's expert gates
	}{
		{"bf16", CheckpointSource(ck), []int64{0, 16 << 10, 4 << 10}, []int{1, 4, 8 + 4}},
		{"q4", VariantSource(v), []int64{0, 3456}, []int{1, 4}},
		{"q4 and f32", VariantSource(mixed), []int64{0}, []int{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ref []float32
			for i, maxBytes := range c.max {
				rows, banks := moeRows(t, dev, g, c.src, maxBytes)
				if banks != c.banks[i] {
					t.Fatalf("MaxPieceBytes %d: %d banks, want %d", maxBytes, banks, c.banks[i])
				}
				if i == 0 {
					ref = rows
					continue
				}
				for j := range rows {
					if math.Float32bits(rows[j]) != math.Float32bits(ref[j]) {
						t.Fatalf("MaxPieceBytes %d: value %d is %g, in one bank %g", maxBytes, j, rows[j], ref[j])
					}
				}
			}
		})
	}
}

// moeRows runs 20 tokens as one step and returns every row (logits and
// routes), with the number of banks per expert gate matrix.
func moeRows(t *testing.T, dev gpu.Device, g model.Geometry, src Source, maxBytes int64) ([]float32, int) {
	t.Helper()
	e, err := New(dev, g, src, Options{Capacity: 24, MaxPieceBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids := make([]int, 20)
	for i := range ids {
		ids[i] = (i*131 + 7) % g.Vocab
	}
	if err := e.Submit(ids, len(ids)); err != nil {
		t.Fatal(err)
	}
	w := g.Vocab + g.Routes()
	raw, err := dev.ReadBuffer(e.Logits(), 0, int64(len(ids)*w*4))
	if err != nil {
		t.Fatal(err)
	}
	var rows []float32
	for _, r := range gpu.Float32Rows(raw, w) {
		rows = append(rows, r...)
	}
	banks := 0
	for _, o := range e.prog {
		if strings.HasPrefix(o.name, "expert-gate[") {
			banks++
		}
	}
	if banks%g.SparseLayers() != 0 {
		t.Fatal(fmt.Sprintf("%d expert-gate dispatches over %d sparse layers", banks, g.SparseLayers()))
	}
	return rows, banks / g.SparseLayers()
}

// What the sparse kernels cannot dispatch is refused before any upload,
// naming the field: route_grouped scores one group per invocation of a
// workgroup.
func TestCheckMoE(t *testing.T) {
	ok := model.Geometry{Arch: "Glm4MoeForCausalLM", Dim: 64, Experts: 128, TopK: 8, ExpertIntermediate: 32, Sparse: []bool{false, true},
		Sigmoid: true, Groups: 64, TopKGroup: 4}
	if err := checkMoE(ok, gpu.Limits{}); err != nil {
		t.Fatalf("64 groups: %v", err)
	}
	many := ok
	many.Experts, many.Groups = 256, 128
	if err := checkMoE(many, gpu.Limits{}); err == nil || !strings.Contains(err.Error(), "n_group 128: the GPU router takes at most 64 groups") {
		t.Fatalf("128 groups: %v", err)
	}
	wide := ok
	wide.TopK = 70000
	if err := checkMoE(wide, gpu.Limits{}); err == nil || !strings.Contains(err.Error(), "num_experts_per_tok 70000") {
		t.Fatalf("top-k beyond the workgroups: %v", err)
	}
}
