package margins_test

import (
	"fmt"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/dump"
)

// Two one-position dumps over three tokens: the reference barely prefers
// token 0 over token 1, the quantized side swaps the two. Both rows have
// the same normaliser, so KLD = 0.1·(p_ref[0] − p_ref[1]) =
// 0.1·(e² − e^1.9)/(e² + e^1.9 + 1) ≈ 0.004664; d = (−0.1, 0.1, 0) gives
// σ = √2·√(0.02/3) ≈ 0.1155.
func ExampleCompare() {
	ref := &dump.Logits{Rows: 1, Vocab: 3, Data: []float32{2, 1.9, 0}}
	test := &dump.Logits{Rows: 1, Vocab: 3, Data: []float32{1.9, 2, 0}}
	r, err := margins.Compare(ref, test, nil, margins.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := r.Positions[0]
	fmt.Printf("%d → %d: %s call, m = %.4f logits, σ = %.4f, m/σ = %.2f\n",
		p.RefChoice, p.TestChoice, p.Class, p.Margin, p.Sigma, *p.Ratio)
	fmt.Printf("KLD %.6f, same top p %.0f%%\n", r.Summary.KLD.Value, 100*r.Summary.SameTop.Value)
	// Output:
	// 0 → 1: close call, m = 0.1000 logits, σ = 0.1155, m/σ = 0.87
	// KLD 0.004664, same top p 0%
}
