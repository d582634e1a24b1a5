package gguf

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
)

func FuzzParse(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	small := []KV{
		{"general.architecture", StringValue("llama")},
		{"n", Uint32Value(3)},
		{"toks", StringsValue([]string{"a", "", "é"})},
		{"scores", Float32sValue([]float32{0, -1})},
		{"nested", mustValue(f, []Value{Int32sValue([]int32{1}), mustValue(f, []Value{})})},
		{"b", BoolValue(true)},
		{"i64", mustValue(f, int64(-9))},
	}
	tensors := []Tensor{
		randomTensor(rng, "a", ggml.F32, 3),
		randomTensor(rng, "b", ggml.Q4_K, 256, 1),
		randomTensor(rng, "c", ggml.Q8_0, 32, 1, 2),
		randomTensor(rng, "d", ggml.IQ2_XXS, 256, 2),
		randomTensor(rng, "e", ggml.MXFP4, 64),
		randomTensor(rng, "f", ggml.TQ1_0, 256),
	}
	for _, align := range []int{1, 32, 64} {
		f.Add(write(f, small, tensors, align))
	}
	f.Add(write(f, small, nil, 0))
	f.Add(write(f, nil, tensors[:1], 0))
	f.Add([]byte(head(3, 0, 0)))
	f.Add(withTensors([]uint64{0, 32}, 64))
	// An i-quant whose row is not whole blocks, and one whose data is short.
	f.Add([]byte(head(3, 1, 0).info("w", []uint64{128, 2}, ggml.IQ2_XXS, 0).pad(32).zeros(132)))
	f.Add([]byte(head(3, 1, 0).info("w", []uint64{256}, ggml.IQ4_XS, 0).pad(32).zeros(100)))
	f.Add(withTensors([]uint64{0, 0}, 64))
	f.Add([]byte(head(3, 1<<60, 1<<60)))
	f.Add([]byte(head(3, 0, 1).str("k").u32(uint32(Array)).u32(uint32(Array)).u64(2).u32(uint32(Uint8)).u64(0).u32(uint32(String)).u64(1).str("s")))

	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := parseBytes(data, "fuzz")
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "gguf: fuzz: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error not one line naming the file: %q", msg)
			}
			return
		}
		for _, kv := range gf.KV {
			// Every getter either answers or words an error; none panics.
			gf.String(kv.Key)
			gf.Uint(kv.Key)
			gf.Int(kv.Key)
			gf.Float(kv.Key)
			gf.Bool(kv.Key)
			gf.Strings(kv.Key)
			gf.Float32s(kv.Key)
			gf.Int32s(kv.Key)
			_ = kv.Value.String()
		}
		var ts []Tensor
		end := gf.DataOffset
		for _, ti := range gf.Tensors {
			if got, ok := gf.Tensor(ti.Name); !ok || got.Offset != ti.Offset {
				t.Fatalf("Tensor(%q) = %+v, %v", ti.Name, got, ok)
			}
			if ti.Offset < end || ti.Offset%gf.Alignment != 0 || ti.Offset+ti.Size > int64(len(data)) {
				t.Fatalf("tensor %q at [%d, +%d) in a %d-byte file, previous end %d, alignment %d", ti.Name, ti.Offset, ti.Size, len(data), end, gf.Alignment)
			}
			end = ti.Offset + ti.Size
			b, err := gf.ReadTensor(ti)
			if err != nil || int64(len(b)) != ti.Size {
				t.Fatalf("ReadTensor(%q): %d bytes, %v", ti.Name, len(b), err)
			}
			// Every decodable type decodes what the reader accepted (its
			// size checked against the type's blocks) without a panic.
			if ggml.Supported(ti.Type) {
				n := int64(1)
				for _, d := range ti.Dims {
					n *= int64(d)
				}
				if err := ggml.Dequantize(ti.Type, b, make([]float32, n)); err != nil {
					t.Fatalf("tensor %q (%v, dims %v) read but does not decode: %v", ti.Name, ti.Type, ti.Dims, err)
				}
			}
			ts = append(ts, Tensor{ti.Name, ti.Dims, ti.Type, b})
		}
		// Anything that parses must write back, and the rewrite must read
		// and rewrite to the same bytes.
		var once, twice bytes.Buffer
		if err := Write(&once, gf.KV, ts, int(gf.Alignment)); err != nil {
			t.Fatalf("rewriting a parsed file: %v", err)
		}
		again, err := parseBytes(once.Bytes(), "rewrite")
		if err != nil {
			t.Fatalf("parsing the rewrite: %v", err)
		}
		if len(again.KV) != len(gf.KV) || len(again.Tensors) != len(gf.Tensors) {
			t.Fatalf("the rewrite has %d pairs and %d tensors, not %d and %d", len(again.KV), len(again.Tensors), len(gf.KV), len(gf.Tensors))
		}
		for i := range ts {
			ts[i].Data, _ = again.ReadTensor(again.Tensors[i])
		}
		if err := Write(&twice, again.KV, ts, int(again.Alignment)); err != nil || !bytes.Equal(once.Bytes(), twice.Bytes()) {
			t.Fatalf("a second rewrite differs (%v)", err)
		}
	})
}
