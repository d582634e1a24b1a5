package gptq

import (
	"fmt"
	"testing"
)

// A module quantized as GPTQModel stores it, and read back as the lookup
// matrix the engines run: 3-bit codes become 4-bit ones, s·(q−z) a scale
// and an offset.
func Example() {
	f, _ := New(Config{Bits: 3, GroupSize: 16, Sym: false, DescAct: true})
	w := make([]float32, 32*32) // W (32 outputs, 32 inputs)
	for i := range w {
		w[i] = float32(i%7) - 3
	}
	stored, _ := f.Quantize("proj", w, 32, 32)
	t := tensors{}
	for _, x := range stored {
		t[x.Name] = x
		fmt.Println(x.Name, x.DType, x.Shape)
	}
	m, _ := f.Matrix(t, "proj")
	fmt.Println(f.Name(), m.Rows, m.Cols, m.Bits, m.Groups, m.GIdx != nil)
	// Output:
	// proj.qweight I32 [3 32]
	// proj.qzeros I32 [2 3]
	// proj.scales F16 [2 32]
	// proj.g_idx I32 [32]
	// gptq 3-bit g16 asym desc_act 32 32 4 2 true
}

// BenchmarkMatrix transcodes a 4096×4096 4-bit g128 act-order module.
func BenchmarkMatrix(b *testing.B) {
	const n = 4096
	f, _ := New(Config{Bits: 4, GroupSize: 128, Sym: true, DescAct: true})
	w := make([]float32, n*n)
	for i := range w {
		w[i] = float32(i%13) - 6 + float32(i%n)/n
	}
	stored, err := f.Quantize("proj", w, n, n)
	if err != nil {
		b.Fatal(err)
	}
	t := tensors{}
	for _, x := range stored {
		t[x.Name] = x
	}
	b.SetBytes(n * n / 2)
	for b.Loop() {
		if _, err := f.Matrix(t, "proj"); err != nil {
			b.Fatal(err)
		}
	}
}
