package llamacpp

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// A session driven chunk by chunk (a prefill in two batches, then single
// tokens, then a reset and a second sequence) gives the rows that one
// teacher-forced pass of Logits gives, and says what it ran with.
func TestSessionMatchesLogits(t *testing.T) {
	h := Harness(t)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	h.WriteTinyModel(t, path, 7)
	ids := []int{1, 17, 300, 42, 5, 99, 511, 0, 256, 3}
	want := h.Logits(t, path, ids, LogitsOptions{Threads: 2})
	s, err := h.Session(path, SessionOptions{Threads: 2, Ctx: 16, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Vocab != 512 {
		t.Fatalf("vocab %d, want 512", s.Vocab)
	}
	st := s.Settings
	if st.Build != "cpu" || st.Threads != 2 || st.Batch != 4 || st.UBatch != 4 || st.Ctx < 16 || st.TypeK != "f16" || st.TypeV != "f16" ||
		st.FlashAsked != "auto" || (st.FlashAttn != "on" && st.FlashAttn != "off") || !strings.HasPrefix(st.Device, "CPU") ||
		!strings.HasPrefix(st.Package, "@node-llama-cpp/linux-x64@") || !strings.HasPrefix(st.Source, "llama.cpp@") {
		t.Errorf("settings %+v", st)
	}
	for pass := range 2 {
		var got [][]float32
		for _, step := range []struct {
			lo, hi int
			want   Want
		}{{0, 4, All}, {4, 7, Last}, {7, 8, Last}, {8, 10, All}} {
			rows, err := s.Decode(ids[step.lo:step.hi], step.want)
			if err != nil {
				t.Fatal(err)
			}
			if step.want == Last {
				if len(rows) != 1 {
					t.Fatalf("%d rows for the last", len(rows))
				}
				got = append(got, make([][]float32, step.hi-step.lo-1)...)
			}
			got = append(got, rows...)
		}
		for i, row := range got {
			if row == nil {
				continue
			}
			if d := maxRelDiff(row, want[i]); d > 1e-3 {
				t.Errorf("pass %d, position %d: rows differ by %g of the largest logit", pass, i, d)
			}
		}
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Decode(make([]int, 5), All); err == nil || !strings.Contains(err.Error(), "batch holds 1 to 4") {
		t.Errorf("5 tokens in a batch of 4: %v", err)
	}
	if _, err := s.Decode([]int{512}, All); err == nil || !strings.Contains(err.Error(), "outside the vocabulary of 512") {
		t.Errorf("id 512: %v", err)
	}
}

// maxRelDiff is max |a-b| over max |b|.
func maxRelDiff(a, b []float32) float64 {
	var d, m float64
	for i := range b {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
		m = math.Max(m, math.Abs(float64(b[i])))
	}
	return d / m
}

func TestSessionOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		opt  SessionOptions
		want string
	}{
		{SessionOptions{Build: "metal", Ctx: 8}, `llama.cpp build "metal": want one of cpu, vulkan`},
		{SessionOptions{FlashAttn: "maybe", Ctx: 8}, `llama.cpp flash attention "maybe": want one of auto, on, off`},
		{SessionOptions{TypeK: "q4_K", Ctx: 8}, `llama.cpp KV cache type (K) "q4_K": want one of f32, f16, bf16, q8_0`},
		{SessionOptions{TypeV: "f8", Ctx: 8}, `llama.cpp KV cache type (V) "f8"`},
		{SessionOptions{Ctx: 8, Batch: 4, UBatch: 8}, "ubatch <= batch"},
		{SessionOptions{Ctx: 0}, "positive sizes"},
	} {
		if err := c.opt.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opt, err, c.want)
		}
	}
}
