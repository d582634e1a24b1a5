package quant_test

import (
	"fmt"

	"logitscope/internal/quant"
)

func Example() {
	// W (2, 3): each row is one zero-padded group of 32.
	w := []float32{
		0.5, -1, 0.25,
		2, 0.01, -0.7,
	}
	blob, err := quant.Quantize(quant.Q4, w, 2, 3)
	if err != nil {
		panic(err)
	}
	l, _ := quant.NewLayout(quant.Q4, 2, 3)
	fmt.Println(len(blob), "bytes =", l.Rows, "rows ×", l.RowBytes())

	deq := make([]float32, len(w))
	if err := quant.Dequantize(quant.Q4, blob, 2, 3, deq); err != nil {
		panic(err)
	}
	// Row 0's scale is f16(1/7) = 0.142822265625; row 1's is f16(2/7).
	fmt.Println(deq)
	// Output:
	// 40 bytes = 2 rows × 20
	// [0.57128906 -0.99975586 0.28564453 1.9995117 0 -0.57128906]
}

func ExampleLayout_Codes() {
	row := []float32{0.5, -1, 0.25, 0}
	blob, err := quant.Quantize(quant.Q4, row, 1, len(row))
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := quant.NewLayout(quant.Q4, 1, len(row))
	l.Codes(blob, 0, func(g int, scale uint16, q *[quant.GroupSize]int8) {
		fmt.Printf("group %d: scale %#04x, codes %v\n", g, scale, q[:4])
	})
	// amax 1 / qmax 7 = 1/7 is f16 0x3092; -1 is code -7.
	// Output:
	// group 0: scale 0x3092, codes [4 -7 2 0]
}
