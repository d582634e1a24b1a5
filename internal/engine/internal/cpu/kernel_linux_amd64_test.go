package cpu

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
)

// The a8 kernels read nothing past a piece's last row: with the piece's
// bytes ending where an unreadable page begins, a read past them would
// crash the test. Rows of 1 to 17 blocks leave every partial last chunk;
// the last rows come in quads, with a quad and alone.
func TestRowsA8StayInPiece(t *testing.T) {
	if !asmKernels() || packA8 == nil {
		t.Skip("no a8 assembly on this CPU")
	}
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 64*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	guard := len(mem) - page
	if err := syscall.Mprotect(mem[guard:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(13, 14))
	const rows = 8
	for _, f := range []model.Format{{Scheme: quant.Q4}, {Scheme: quant.Q8}, {Type: ggml.Q4_0}, {Type: ggml.Q8_0}} {
		for nb := 1; nb <= 17; nb++ {
			k := nb * a8Block
			data := a8Weights(t, rng, f, rows, k)
			at := mem[guard-len(data) : guard]
			copy(at, data)
			p := &model.Piece{Rows: rows, Format: f, Data: at}
			acts := newA8Acts(randomValues(rng, k, 0))
			for _, a := range []int{0, 1, rows - 3, rows - 1} { // quads, leftovers with a quad, alone
				got, want := make([]float32, rows-a), make([]float32, rows-a)
				rowsA8(p, k, a, rows, acts, got, nil, nil)
				rowsA8Go(p, k, a, rows, acts, want, make([]int32, nb), make([]float32, nb))
				sameBits(t, fmt.Sprintf("%v/%d blocks/rows %d..%d", f, nb, a, rows), got, want)
			}
			if newA8Batch(f, []*a8Acts{acts}) != nil { // the prefill kernels'
				batch := []*a8Acts{acts, newA8Acts(randomValues(rng, k, 1)), newA8Acts(randomValues(rng, k, 2))}
				sameA8Batches(t, fmt.Sprintf("%v/%d blocks/prefill", f, nb), p, k, rows-3, rows, batch)
			}
		}
	}
}
