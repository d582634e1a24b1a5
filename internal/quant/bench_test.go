package quant

import (
	"fmt"
	"testing"
)

// A Qwen2.5-0.5B MLP projection: (4864, 896). MB/s counts float32 bytes in
// (Quantize) or out (Dequantize).
const benchRows, benchCols = 4864, 896

func BenchmarkQuantize(b *testing.B) {
	w := weights(9, benchRows*benchCols)
	for _, s := range Schemes {
		b.Run(string(s), func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				if _, err := Quantize(s, w, benchRows, benchCols); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDequantize(b *testing.B) {
	w := weights(9, benchRows*benchCols)
	dst := make([]float32, len(w))
	for _, s := range Schemes {
		blob, err := Quantize(s, w, benchRows, benchCols)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint(s), func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				if err := Dequantize(s, blob, benchRows, benchCols, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
