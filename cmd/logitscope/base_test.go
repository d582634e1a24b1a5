package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/peer/llamacpp"
)

// llamaStat reads one of llama-perplexity's "name: value ± err" lines.
func llamaStat(t *testing.T, out, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(name) + `\s*:\s*([-0-9.e+]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("llama-perplexity printed no %q:\n%s", name, out)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A llama.cpp user's --kl-divergence-base file is a reference as it is:
// capture --panel BASE runs its chunks, and report --ref BASE scores the
// positions llama.cpp scores. The F32 model against its own base file
// (llama.cpp's logits, 16-bit) agrees all but exactly; a Q4_K_M file
// against it gives the mean KLD and same-top share that llama-perplexity
// --kl-divergence prints for the same file (measured: 0.1458 and 0.1438,
// 87.1 % and 87.5 %), within what two engines' arithmetic differs by.
func TestReportKLDivergenceBase(t *testing.T) {
	tool := llamacpp.PerplexityTool(t)
	h := llamacpp.Harness(t)
	f32 := ggufModel(t)
	dir := t.TempDir()
	base, q4 := filepath.Join(dir, "base.kld"), filepath.Join(dir, "q4_k_m.gguf")
	corpus, _ := filepath.Abs("../../internal/model/synth/corpus.txt")
	common := []string{"-f", corpus, "-c", "64", "-b", "64", "--chunks", "8", "-t", "2"}
	tool.Run(t, append([]string{"-m", f32, "--kl-divergence-base", base}, common...)...)
	h.QuantizeModel(t, f32, q4, "Q4_K_M")
	llama := tool.Run(t, append([]string{"-m", q4, "--kl-divergence-base", base, "--kl-divergence"}, common...)...)
	llamaKLD, llamaSame := llamaStat(t, llama, "Mean    KLD"), llamaStat(t, llama, "Same top p")/100

	type stats struct {
		Notes   []string
		Summary struct {
			KLD     struct{ Value float64 } `json:"kld_mean"`
			SameTop struct{ Value float64 } `json:"same_top"`
		}
		Rows int
	}
	report := func(test string) stats {
		t.Helper()
		out, err := run(t, reportCmd, "--ref", base, "--test", test, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var s stats
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if s.Rows != 8*(64-1-32) || len(s.Notes) == 0 || !strings.Contains(s.Notes[0], "llama.cpp's --kl-divergence-base file") {
			t.Fatalf("%d rows (want 8 chunks × 31 scored), notes %q", s.Rows, s.Notes)
		}
		return s
	}
	cpu := []string{"--device", "cpu", "--runtime", "native", "--panel", base}

	own := filepath.Join(dir, "f32")
	if _, err := run(t, captureCmd, append([]string{"--model", f32, "--out", own}, cpu...)...); err != nil {
		t.Fatal(err)
	}
	s := report(own)
	t.Logf("F32 capture vs llama.cpp's F32 base: mean KLD %.3g, same top %.4f", s.Summary.KLD.Value, s.Summary.SameTop.Value)
	if s.Summary.KLD.Value > 1e-4 || s.Summary.SameTop.Value < 0.99 {
		t.Errorf("the F32 model against its own base: mean KLD %g, same top %g; want ≈ 0 and ≈ 1", s.Summary.KLD.Value, s.Summary.SameTop.Value)
	}

	quant := filepath.Join(dir, "q4.dump")
	if _, err := run(t, captureCmd, append([]string{"--model", f32, "--variant", q4, "--activations", "q8", "--dump-logits", quant}, cpu...)...); err != nil {
		t.Fatal(err)
	}
	s = report(quant)
	t.Logf("Q4_K_M: mean KLD %.6f here, %.6f by llama-perplexity; same top %.4f here, %.4f there",
		s.Summary.KLD.Value, llamaKLD, s.Summary.SameTop.Value, llamaSame)
	if d := s.Summary.KLD.Value/llamaKLD - 1; d < -0.05 || d > 0.05 {
		t.Errorf("Q4_K_M's mean KLD is %g against the base file, llama-perplexity says %g", s.Summary.KLD.Value, llamaKLD)
	}
	if d := s.Summary.SameTop.Value - llamaSame; d < -0.02 || d > 0.02 {
		t.Errorf("Q4_K_M's same top is %g against the base file, llama-perplexity says %g", s.Summary.SameTop.Value, llamaSame)
	}

	// Another panel's capture, or a base file as the test, is refused.
	other := filepath.Join(dir, "other.kld")
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	b[20+4*40] ^= 1 // chunk 0's token 40, which position 39 predicts
	if err := os.WriteFile(other, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ test, want string }{
		{own, "was not captured on " + other + "'s chunks: in chunk 0, position 39"},
		{base, "is a llama.cpp base file too"},
	} {
		if _, err := run(t, reportCmd, "--ref", other, "--test", c.test); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("report --ref %s --test %s: %v, want %q", other, c.test, err, c.want)
		}
	}
}
