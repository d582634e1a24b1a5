package ggml_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/peer/llamacpp"
)

// probed are ggml's tables as read back from the library's to_float:
// entries of 8 (grids of 8 bytes) or 4 (IQ3's grids) bytes, ksigns' and
// the value tables' bytes.
type probed struct {
	iq2xxs, iq2xs, iq2s, iq1s []uint64
	iq3xxs, iq3s              []uint32
	ksigns                    []byte
	iq4nl, mxfp4              []int8
}

// blockRun dequantizes n blocks of typ, block k made by set(k, b) from a
// zero block with d = 1 (f16 0x3C00) at dOff (-1: none), and returns the
// weights of each block.
func blockRun(t *testing.T, h *llamacpp.H, typ ggml.Type, n, dOff int, set func(k int, b []byte)) [][]float32 {
	bb, bs := typ.BlockBytes(), typ.BlockSize()
	data := make([]byte, n*bb)
	for k := range n {
		b := data[k*bb : (k+1)*bb]
		if dOff >= 0 {
			binary.LittleEndian.PutUint16(b[dOff:], 0x3C00)
		}
		set(k, b)
	}
	y := h.Dequantize(t, typ, data)
	out := make([][]float32, n)
	for k := range out {
		out[k] = y[k*bs : (k+1)*bs]
	}
	return out
}

// magnitude reads v / unit as a whole number in [0, 256), failing the test
// otherwise: a probed table entry must come back exact.
func magnitude(t *testing.T, v, unit float32, what string, i int) byte {
	m := v / unit
	if m < 0 || m > 255 || m != float32(math.Trunc(float64(m))) {
		t.Fatalf("%s %d: weight %g is not a whole multiple of %g", what, i, v, unit)
	}
	return byte(m)
}

// probeTables reads every table out of the library, one entry per run
// of weights, through blocks whose scales make each weight the entry
// itself times a power of two:
//
//   - IQ2_XXS, IQ2_XS, IQ2_S: d = 1, scale nibbles 0, so db = 0.125 and
//     weight j of a run is 0.125 * byte j of its grid entry; sign index 0
//     (ksigns[0] = 0), IQ2_S's sign bytes 0. The runs of a block take
//     consecutive grid indices (32 a block).
//   - IQ3_XXS, IQ3_S: db = 0.25 and 1, 64 indices a block, 4 weights each.
//   - IQ1_S: dl = 1, delta +1/8: weight = int8 entry + 0.125.
//   - ksigns: IQ2_XXS with grid entry 0 (all magnitudes 8, nonzero) and
//     sign index i in run i: the negative weights are the bits.
//   - kvalues_iq4nl: IQ4_NL with d = 1 and nibble j at weight j.
//   - kvalues_mxfp4: MXFP4 with e = 128 (a halved scale of 1): the table
//     holds E2M1's values doubled.
func probeTables(t *testing.T, h *llamacpp.H) probed {
	var p probed
	grid8 := func(typ ggml.Type, n, dOff int, unit float32, index func(b []byte, run, i int)) []uint64 {
		runs := typ.BlockSize() / 8
		ys := blockRun(t, h, typ, n/runs, dOff, func(k int, b []byte) {
			for r := range runs {
				index(b, r, k*runs+r)
			}
		})
		e := make([]uint64, n)
		for i := range e {
			y := ys[i/runs][8*(i%runs):]
			for j := range 8 {
				if unit == 0 { // IQ1_S: int8 values shifted by +1/8
					e[i] |= uint64(byte(int8(y[j]-0.125))) << (8 * j)
					if float32(int8(y[j]-0.125))+0.125 != y[j] {
						t.Fatalf("%v entry %d: weight %g is not an integer + 1/8", typ, i, y[j])
					}
					continue
				}
				e[i] |= uint64(magnitude(t, y[j], unit, typ.String(), i)) << (8 * j)
			}
		}
		return e
	}
	p.iq2xxs = grid8(ggml.IQ2_XXS, 256, 0, 0.125, func(b []byte, r, i int) { b[2+8*(r/4)+r%4] = byte(i) })
	p.iq2xs = grid8(ggml.IQ2_XS, 512, 0, 0.125, func(b []byte, r, i int) { binary.LittleEndian.PutUint16(b[2+2*r:], uint16(i)) })
	p.iq2s = grid8(ggml.IQ2_S, 1024, 0, 0.125, func(b []byte, r, i int) {
		b[2+r] = byte(i)
		b[66+r/4] |= byte(i>>8) << (2 * (r % 4))
	})
	p.iq1s = grid8(ggml.IQ1_S, 2048, 0, 0, func(b []byte, r, i int) {
		b[2+r] = byte(i)
		at := 34 + 2*(r/4)
		binary.LittleEndian.PutUint16(b[at:], binary.LittleEndian.Uint16(b[at:])|uint16(i>>8)<<(3*(r%4)))
	})
	grid4 := func(typ ggml.Type, n int, unit float32, index func(b []byte, q, i int)) []uint32 {
		ys := blockRun(t, h, typ, n/64, 0, func(k int, b []byte) {
			for q := range 64 {
				index(b, q, 64*k+q)
			}
		})
		e := make([]uint32, n)
		for i := range e {
			y := ys[i/64][4*(i%64):]
			for j := range 4 {
				e[i] |= uint32(magnitude(t, y[j], unit, typ.String(), i)) << (8 * j)
			}
		}
		return e
	}
	p.iq3xxs = grid4(ggml.IQ3_XXS, 256, 0.25, func(b []byte, q, i int) { b[2+q] = byte(i) })
	p.iq3s = grid4(ggml.IQ3_S, 512, 1, func(b []byte, q, i int) {
		b[2+q] = byte(i)
		b[66+q/8] |= byte(i>>8) << (q % 8)
	})
	if p.iq2xxs[0] != 0x0808080808080808 {
		t.Fatalf("iq2xxs_grid[0] = %#x: the ksigns probe wants all magnitudes nonzero", p.iq2xxs[0])
	}
	ys := blockRun(t, h, ggml.IQ2_XXS, 4, 0, func(k int, b []byte) {
		for ib := range 8 {
			var aux uint32
			for l := range 4 {
				aux |= uint32(32*k+4*ib+l) << (7 * l)
			}
			binary.LittleEndian.PutUint32(b[6+8*ib:], aux)
		}
	})
	for i := range 128 {
		var s byte
		for j, v := range ys[i/32][8*(i%32) : 8*(i%32)+8] {
			if math.Abs(float64(v)) != 1 {
				t.Fatalf("ksigns %d: weight %g, want ±1", i, v)
			}
			if v < 0 {
				s |= 1 << j
			}
		}
		p.ksigns = append(p.ksigns, s)
	}
	nibbles := func(b []byte) {
		for j := range 8 {
			b[j] = byte(2*j) | byte(2*j+1)<<4
		}
	}
	values := func(ys []float32, order []int) []int8 {
		v := make([]int8, 16)
		for k, at := range order {
			if y := ys[at]; float32(int8(y)) != y {
				t.Fatalf("value table entry %d: %g is not an int8", k, y)
			}
			v[k] = int8(ys[at])
		}
		return v
	}
	// Byte j of qs (j < 8) holds nibbles 2j and 2j+1: weight j is value 2j,
	// weight j+16 value 2j+1.
	order := make([]int, 16)
	for k := range order {
		order[k] = k/2 + 16*(k%2)
	}
	p.iq4nl = values(blockRun(t, h, ggml.IQ4_NL, 1, 0, func(_ int, b []byte) { nibbles(b[2:]) })[0], order)
	p.mxfp4 = values(blockRun(t, h, ggml.MXFP4, 1, -1, func(_ int, b []byte) { b[0] = 128; nibbles(b[1:]) })[0], order)
	return p
}

// source is tables.go for p.
func (p probed) source() []byte {
	var b bytes.Buffer
	b.WriteString(`// Code generated by go test ./internal/format/ggml -run TestTables -update; DO NOT EDIT.

package ggml

// ggml's lookup tables for the i-quants and MXFP4, read back from
// llama.cpp's own library (the harness of package llamacpp) by
// dequantizing blocks made to show one entry per run of weights: scales
// chosen so that each weight is an entry times a power of two, each run
// its own grid index or sign index (tables_test.go's probeTables says
// how, type by type). TestTables reads them again and compares.
`)
	list := func(name, typ string, n int, perLine int, item func(i int) string) {
		fmt.Fprintf(&b, "\nvar %s = [%d]%s{", name, n, typ)
		for i := range n {
			if i%perLine == 0 {
				b.WriteString("\n\t")
			} else {
				b.WriteString(" ")
			}
			b.WriteString(item(i) + ",")
		}
		b.WriteString("\n}\n")
	}
	u64 := func(e []uint64) func(int) string { return func(i int) string { return fmt.Sprintf("%#016x", e[i]) } }
	u32 := func(e []uint32) func(int) string { return func(i int) string { return fmt.Sprintf("%#08x", e[i]) } }
	list("iq2xxsGrid", "uint64", len(p.iq2xxs), 4, u64(p.iq2xxs))
	list("iq2xsGrid", "uint64", len(p.iq2xs), 4, u64(p.iq2xs))
	list("iq2sGrid", "uint64", len(p.iq2s), 4, u64(p.iq2s))
	list("iq3xxsGrid", "uint32", len(p.iq3xxs), 8, u32(p.iq3xxs))
	list("iq3sGrid", "uint32", len(p.iq3s), 8, u32(p.iq3s))
	list("iq1sGrid", "uint64", len(p.iq1s), 4, u64(p.iq1s))
	list("ksigns", "uint8", len(p.ksigns), 16, func(i int) string { return fmt.Sprintf("%#02x", p.ksigns[i]) })
	list("kvaluesIQ4NL", "int8", 16, 16, func(i int) string { return fmt.Sprint(p.iq4nl[i]) })
	list("kvaluesMXFP4", "int8", 16, 16, func(i int) string { return fmt.Sprint(p.mxfp4[i]) })
	return b.Bytes()
}

// TestTables reads ggml's grids and value tables out of the library and
// checks that tables.go is what they generate, entry by entry; with
// -update it writes tables.go from what it read.
func TestTables(t *testing.T) {
	h := llamacpp.Harness(t)
	p := probeTables(t, h)
	if *update {
		if err := os.WriteFile("tables.go", p.source(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote tables.go: rebuild and run again to compare")
		return
	}
	have, err := os.ReadFile("tables.go")
	if err != nil {
		t.Fatal(err)
	}
	if want := p.source(); !bytes.Equal(have, want) {
		line := 1 + bytes.Count(have[:commonPrefix(have, want)], []byte("\n"))
		t.Fatalf("tables.go differs from the library's tables from line %d on (regenerate with -update)", line)
	}
}

// commonPrefix is how many leading bytes a and b share.
func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
