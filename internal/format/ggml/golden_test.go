package ggml_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/peer/llamacpp"
)

var update = flag.Bool("update", false, "regenerate testdata/dequantize/*.golden with llama.cpp's libraries")

// TestDequantizeGolden checks Dequantize against what llama.cpp's to_float
// gave for a few blocks per type, recorded in testdata/dequantize, so that
// exactness is checked where the libraries are not installed, and on other
// architectures (where Go may fuse multiply-adds). With -update it
// regenerates the files with the harness first.
//
// On amd64 every weight must match bit for bit, NaNs included. Elsewhere a
// NaN matches any NaN: the NaN that 0·∞ creates is 0xFFC00000 on x86 and
// 0x7FC00000 on arm64, and which of two NaN operands an operation returns
// differs between them too.
func TestDequantizeGolden(t *testing.T) {
	var h *llamacpp.H
	if *update {
		h = llamacpp.Harness(t)
	}
	for _, typ := range supported() {
		t.Run(typ.String(), func(t *testing.T) {
			path := filepath.Join("testdata", "dequantize", typ.String()+".golden")
			if *update {
				data, notes := goldenBlocks(t, h, typ)
				writeGolden(t, path, typ, data, notes, h.Dequantize(t, typ, data))
			}
			data, want := readGolden(t, path)
			got := make([]float32, len(want))
			if err := ggml.Dequantize(typ, data, got); err != nil {
				t.Fatal(err)
			}
			exactNaN := runtime.GOARCH == "amd64"
			for i := range want {
				g, w := math.Float32bits(got[i]), math.Float32bits(want[i])
				if g == w || !exactNaN && math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i])) {
					continue
				}
				t.Fatalf("weight %d (block %d): got %08x (%g), golden %08x (%g)", i, i/typ.BlockSize(), g, got[i], w, want[i])
			}
		})
	}
}

// goldenBlocks makes the recorded blocks of typ: for a quantized type, the
// library's quantization of normal weights and of one outlier among tiny
// ones, a block of random bytes, and random bytes with an infinite first
// scale; for a plain type, 64 values of the same kinds and the special
// values of its format.
func goldenBlocks(t *testing.T, h *llamacpp.H, typ ggml.Type) ([]byte, []string) {
	rng := rand.New(rand.NewPCG(uint64(typ), 3))
	if typ.BlockSize() == 1 {
		x := make([]float32, 32)
		normal(1)(rng, x)
		var data []byte
		if typ == ggml.F32 {
			for _, v := range x {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
			}
		} else {
			data = h.Quantize(t, typ, x, 1, len(x))
		}
		random, _ := randomBlocks(typ, 2, uint64(typ)) // 32 random values, then the special ones
		data = append(data, random...)
		return data, []string{"32 normal σ=1 values (through ggml_quantize_chunk)", "32 random", "the format's special values"}
	}
	bs := typ.BlockSize()
	x := make([]float32, 2*bs)
	normal(1)(rng, x[:bs])
	inputNamed("one huge among tiny").gen(rng, x[bs:])
	data := h.QuantizeImatrix(t, typ, x, llamacpp.Importance(typ, bs), 2, bs)
	random, _ := randomBlocks(typ, 1, uint64(typ))
	data = append(data, random[:typ.BlockBytes()]...)
	notes := []string{"normal σ=1 (ggml_quantize_chunk)", "one huge among tiny (ggml_quantize_chunk)", "random bytes"}
	if offs := halfOffsets[typ]; len(offs) > 0 { // IQ1_M's and MXFP4's scales are not f16 fields
		inf, _ := randomBlocks(typ, 1, uint64(typ)+1)
		inf = inf[:typ.BlockBytes()]
		binary.LittleEndian.PutUint16(inf[offs[0]:], 0x7C00)
		data = append(data, inf...)
		notes = append(notes, "random bytes, first f16 scale +inf")
	}
	return data, notes
}

func writeGolden(t *testing.T, path string, typ ggml.Type, data []byte, notes []string, want []float32) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ggml.Dequantize golden for %v: its input (hex) and the float32 bits that\n", typ)
	fmt.Fprintf(&b, "# llama.cpp's to_float gave for it, in turn:\n")
	for _, n := range notes {
		fmt.Fprintf(&b, "#   %s\n", n)
	}
	fmt.Fprintf(&b, "# Regenerate: go test ./internal/format/ggml -run TestDequantizeGolden -update\n")
	for i := 0; i < len(data); i += 64 {
		fmt.Fprintf(&b, "data %x\n", data[i:min(i+64, len(data))])
	}
	for i := 0; i < len(want); i += 8 {
		b.WriteString("want")
		for _, v := range want[i:min(i+8, len(want))] {
			fmt.Fprintf(&b, " %08x", math.Float32bits(v))
		}
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readGolden(t *testing.T, path string) ([]byte, []float32) {
	f, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with -update)", err)
	}
	var data []byte
	var want []float32
	sc := bufio.NewScanner(bytes.NewReader(f))
	for line := 1; sc.Scan(); line++ {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "data":
			b, err := hex.DecodeString(rest)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			data = append(data, b...)
		case "want":
			for _, w := range strings.Fields(rest) {
				bits, err := strconv.ParseUint(w, 16, 32)
				if err != nil {
					t.Fatalf("%s:%d: %v", path, line, err)
				}
				want = append(want, math.Float32frombits(uint32(bits)))
			}
		case "#", "":
		default:
			t.Fatalf("%s:%d: unexpected %q", path, line, kind)
		}
	}
	return data, want
}
