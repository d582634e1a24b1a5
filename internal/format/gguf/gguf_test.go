package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
)

// raw assembles GGUF bytes field by field, independently of Write, for
// crafted and corrupt files.
type raw []byte

func (r raw) u8(v uint8) raw   { return append(r, v) }
func (r raw) u32(v uint32) raw { return binary.LittleEndian.AppendUint32(r, v) }
func (r raw) u64(v uint64) raw { return binary.LittleEndian.AppendUint64(r, v) }
func (r raw) str(s string) raw { return append(r.u64(uint64(len(s))), s...) }
func (r raw) pad(align int) raw {
	for len(r)%align != 0 {
		r = append(r, 0)
	}
	return r
}
func (r raw) zeros(n int) raw { return append(r, make([]byte, n)...) }

// head starts a file: magic, version, tensor_count, kv_count.
func head(version uint32, nTensors, nKV uint64) raw {
	return raw("GGUF").u32(version).u64(nTensors).u64(nKV)
}

// info appends a tensor info.
func (r raw) info(name string, dims []uint64, typ ggml.Type, off uint64) raw {
	r = r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r = r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// kvU32 appends a UINT32 pair.
func (r raw) kvU32(key string, v uint32) raw { return r.str(key).u32(uint32(Uint32)).u32(v) }

// withTensors is a file of F32 tensors a, b, ... of 8 weights (32 bytes)
// each at the given offsets, with dataLen bytes of data after the padding.
func withTensors(offs []uint64, dataLen int) []byte {
	r := head(3, uint64(len(offs)), 0)
	for i, off := range offs {
		r = r.info(string(rune('a'+i)), []uint64{8}, ggml.F32, off)
	}
	return r.pad(32).zeros(dataLen)
}

func mustValue(t testing.TB, x any) Value {
	t.Helper()
	v, err := ValueOf(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func write(t testing.TB, kv []KV, tensors []Tensor, alignment int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, kv, tensors, alignment); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func parseBytes(data []byte, name string) (*File, error) {
	return Parse(bytes.NewReader(data), int64(len(data)), name)
}

// randomTensor is a tensor of typ with dims and random bytes: the
// container does not look inside blocks.
func randomTensor(rng *rand.Rand, name string, typ ggml.Type, dims ...uint64) Tensor {
	rows := uint64(1)
	for _, d := range dims[1:] {
		rows *= d
	}
	n, err := typ.RowBytes(int(dims[0]))
	if err != nil {
		panic(err)
	}
	data := make([]byte, n*int64(rows))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return Tensor{Name: name, Dims: dims, Type: typ, Data: data}
}

// everyValue holds a pair of every value type, arrays of every element
// type, arrays of arrays, and strings that exercise the reader's paths.
func everyValue(t testing.TB) []KV {
	long := strings.Repeat("chat template {{ x }} ", 4000) // longer than the read buffer
	floats := make([]float32, 20000)                       // more bytes than the read buffer
	for i := range floats {
		floats[i] = float32(i) / 7
	}
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = string(rune(0x4e00 + i))
	}
	inner := []Value{mustValue(t, []int32{1, -2}), mustValue(t, []string{"x"}), mustValue(t, []Value{})}
	xs := []any{
		uint8(200), int8(-100), uint16(60000), int16(-30000), uint32(4000000000), int32(-2000000000),
		float32(3.5), true, false, "", "héllo, 世界 🙂", long, "\xff\xfe not UTF-8 is kept as bytes",
		uint64(math.MaxUint64), int64(math.MinInt64), math.Pi,
		[]uint8{0, 255}, []int8{-128, 127}, []uint16{1, 65535}, []int16{-32768, 32767},
		[]uint32{0, math.MaxUint32}, []int32{math.MinInt32, 0}, floats, []bool{true, false, true},
		vocab, []uint64{math.MaxUint64}, []int64{-1, 1}, []float64{-0.5, 1e300},
		[]string{}, []float32{}, []Value{},
		inner,
		[]Value{mustValue(t, inner), mustValue(t, []Value{mustValue(t, []bool{})})},
	}
	kv := make([]KV, len(xs))
	for i, x := range xs {
		kv[i] = KV{Key: "test.value." + string(rune('a'+i)), Value: mustValue(t, x)}
	}
	return kv
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tensors := []Tensor{
		randomTensor(rng, "token_embd.weight", ggml.Q4_K, 256, 3),
		randomTensor(rng, "blk.0.attn_norm.weight", ggml.F32, 5),
		randomTensor(rng, "blk.0.attn_q.weight", ggml.Q8_0, 64, 2, 3),
		randomTensor(rng, "blk.0.ffn_down.weight", ggml.Q6_K, 512, 1, 1, 2),
		randomTensor(rng, "blk.0.ffn_up.weight", ggml.F16, 3, 3),
		randomTensor(rng, "blk.0.ffn_gate.weight", ggml.BF16, 7),
		randomTensor(rng, "rope_freqs.weight", ggml.I32, 1),
		randomTensor(rng, "output.weight", ggml.Q5_1, 32, 2),
		randomTensor(rng, "ünïcode.weight", ggml.Q2_K, 256),
	}
	kv := everyValue(t)
	for _, align := range []int{0, 1, 8, 32, 64, 4096} {
		t.Run(fmt.Sprint("align", align), func(t *testing.T) {
			data := write(t, kv, tensors, align)
			f, err := parseBytes(data, "rt.gguf")
			if err != nil {
				t.Fatal(err)
			}
			want := int64(align)
			if align == 0 {
				want = 32
			}
			if f.Version != 3 || f.Alignment != want || f.DataOffset%want != 0 {
				t.Errorf("version %d alignment %d data offset %d; want 3, %d, aligned", f.Version, f.Alignment, f.DataOffset, want)
			}
			wantKV := kv
			if want != 32 {
				wantKV = append(slices.Clone(kv), KV{AlignmentKey, Uint32Value(uint32(want))})
			}
			if !reflect.DeepEqual(f.KV, wantKV) {
				for i := range min(len(f.KV), len(wantKV)) {
					if !reflect.DeepEqual(f.KV[i], wantKV[i]) {
						t.Errorf("KV[%d] = %v %v, want %v %v", i, f.KV[i].Key, f.KV[i].Value, wantKV[i].Key, wantKV[i].Value)
					}
				}
				t.Fatalf("got %d pairs, want %d", len(f.KV), len(wantKV))
			}
			if len(f.Tensors) != len(tensors) {
				t.Fatalf("got %d tensors, want %d", len(f.Tensors), len(tensors))
			}
			for i, w := range tensors {
				g := f.Tensors[i]
				if g.Name != w.Name || !slices.Equal(g.Dims, w.Dims) || g.Type != w.Type || g.Size != int64(len(w.Data)) || g.Offset%want != 0 {
					t.Errorf("tensor %d = %+v, want %s %v %v %d bytes, aligned", i, g, w.Name, w.Dims, w.Type, len(w.Data))
				}
				got, err := f.ReadTensor(g)
				if err != nil || !bytes.Equal(got, w.Data) {
					t.Errorf("ReadTensor(%s): %d bytes, %v; want the written ones", w.Name, len(got), err)
				}
			}
			// What was read writes back to the same bytes.
			again := make([]Tensor, len(f.Tensors))
			for i, ti := range f.Tensors {
				b, _ := f.ReadTensor(ti)
				again[i] = Tensor{ti.Name, ti.Dims, ti.Type, b}
			}
			if re := write(t, f.KV, again, int(f.Alignment)); !bytes.Equal(re, data) {
				t.Errorf("rewriting what was read changed the file (%d bytes, was %d)", len(re), len(data))
			}
		})
	}
}

// TestWriteLayout pins Write's bytes to a file assembled field by field,
// so that the reader and the writer cannot agree on a mistake.
func TestWriteLayout(t *testing.T) {
	q := make([]byte, 34) // one Q8_0 block
	q[0] = 7
	got := write(t,
		[]KV{{"general.architecture", StringValue("llama")}, {"x.list", Int32sValue([]int32{-1, 2})}},
		[]Tensor{
			{Name: "a", Dims: []uint64{2}, Type: ggml.F32, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			{Name: "bb", Dims: []uint64{32, 1}, Type: ggml.Q8_0, Data: q},
		}, 64)
	want := head(3, 2, 3).
		str("general.architecture").u32(uint32(String)).str("llama").
		str("x.list").u32(uint32(Array)).u32(uint32(Int32)).u64(2).u32(math.MaxUint32).u32(2).
		kvU32(AlignmentKey, 64).
		info("a", []uint64{2}, ggml.F32, 0).
		info("bb", []uint64{32, 1}, ggml.Q8_0, 64).
		pad(64).
		u8(1).u8(2).u8(3).u8(4).u8(5).u8(6).u8(7).u8(8).pad(64)
	want = append(want, q...).pad(64)
	if !bytes.Equal(got, want) {
		t.Errorf("Write:\n%x\nwant\n%x", got, []byte(want))
	}
}

func TestParseMalformed(t *testing.T) {
	valid := withTensors([]uint64{0, 32}, 64)
	be := slices.Clone(valid)
	binary.BigEndian.PutUint32(be[4:], 3)
	kv := func(body raw, n uint64) []byte { return append(head(3, 0, n), body...) }
	deep := raw(nil).str("k").u32(uint32(Array))
	for range maxDepth {
		deep = deep.u32(uint32(Array)).u64(1)
	}
	deep = deep.u32(uint32(Uint8)).u64(0)
	// One array of 65,537 empty arrays: 12 bytes each in the file, some
	// 80 in memory.
	manyEmpty := raw(nil).str("k").u32(uint32(Array)).u32(uint32(Array)).u64(maxNested + 1)
	for range maxNested + 1 {
		manyEmpty = manyEmpty.u32(uint32(Uint8)).u64(0)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "file is 0 bytes, too short for a GGUF header"},
		{"bad magic", raw("GGML").u32(3).u64(0).u64(0), `not a GGUF file: magic is "GGML", not "GGUF"`},
		{"truncated version", raw("GGUF").u8(3), "version: truncated: 4 bytes needed at offset 4, the file is 5 bytes"},
		{"version 0", head(0, 0, 0), "version 0 is not supported; only versions 2 and 3 are read"},
		{"version 1", head(1, 0, 0), "version 1 is not supported"},
		{"version 4", head(4, 0, 0), "version 4 is not supported"},
		{"big-endian", be, "version reads as 0x03000000, a byte-swapped 3: this is a big-endian GGUF file; only little-endian files are supported"},
		{"truncated kv_count", head(3, 0, 0)[:20], "kv_count: truncated"},
		{"tensor_count absurd", head(3, 1<<60, 0).zeros(16), "tensor_count 1152921504606846976 is implausible: a tensor info takes at least 32 bytes and 16 bytes are left"},
		{"kv_count absurd", head(3, 0, 1<<60), "kv_count 1152921504606846976 is implausible"},
		{"tensor_count beyond what the pairs leave", append(head(3, 1, 1), raw(nil).kvU32("k", 1).zeros(30)...), "tensor_count 1 is implausible: a tensor info takes at least 32 bytes and 30 bytes are left"},
		{"key length absurd", kv(raw(nil).u64(1<<50).zeros(8), 1), "key 0: string length 1125899906842624 exceeds the 1073741824-byte limit"},
		{"key length beyond file", kv(raw(nil).u64(100).zeros(8), 1), "key 0: string length 100 exceeds the 8 bytes left in the file at offset 32"},
		{"empty key", kv(raw(nil).str("").u32(uint32(Uint8)).u8(0).zeros(1), 1), "key 0 is empty"},
		{"key not UTF-8", kv(raw(nil).str("a\xffb").u32(uint32(Uint8)).u8(0), 1), `key 0 "a\xffb" is not valid UTF-8`},
		{"duplicate key", kv(raw(nil).kvU32("a.b", 1).kvU32("a.b", 2), 2), `key 1 "a.b": appears twice (first as key 0)`},
		{"unknown value type", kv(raw(nil).str("k").u32(13).u8(0), 1), `key 0 "k": value type 13 is unknown`},
		{"truncated value", kv(raw(nil).str("k").u32(uint32(Uint64)).u32(0), 1), `key 0 "k": truncated: 8 bytes needed at offset 37`},
		{"truncated string value", kv(raw(nil).str("k").u32(uint32(String)).u64(9).zeros(4), 1), `key 0 "k": string length 9 exceeds the 4 bytes left`},
		{"bool not 0 or 1", kv(raw(nil).str("k").u32(uint32(Bool)).u8(2), 1), `key 0 "k": BOOL byte is 2, neither 0 nor 1`},
		{"bool array element", kv(raw(nil).str("k").u32(uint32(Array)).u32(uint32(Bool)).u64(2).u8(1).u8(9), 1), `key 0 "k": element 1: BOOL byte is 9`},
		{"array element type unknown", kv(raw(nil).str("k").u32(uint32(Array)).u32(99).u64(0), 1), `key 0 "k": array element type 99 is unknown`},
		{"array length absurd", kv(raw(nil).str("k").u32(uint32(Array)).u32(uint32(Uint8)).u64(1<<40), 1), `key 0 "k": array length 1099511627776 exceeds the 1073741824-element limit`},
		{"array beyond file", kv(raw(nil).str("k").u32(uint32(Array)).u32(uint32(Float32)).u64(3).zeros(8), 1), `key 0 "k": array of 3 FLOAT32 elements needs at least 4 bytes each but 8 bytes are left`},
		{"string array beyond file", kv(raw(nil).str("k").u32(uint32(Array)).u32(uint32(String)).u64(1<<20).zeros(16), 1), `array of 1048576 STRING elements needs at least 8 bytes each`},
		{"string array element truncated", kv(raw(nil).str("tokenizer.ggml.tokens").u32(uint32(Array)).u32(uint32(String)).u64(2).str("ok").u64(50).zeros(8), 1), `key 0 "tokenizer.ggml.tokens": element 1: string length 50 exceeds the 8 bytes left`},
		{"nested array element", kv(raw(nil).str("k").u32(uint32(Array)).u32(uint32(Array)).u64(2).u32(uint32(Uint8)).u64(0).u32(77).u64(0), 1), `key 0 "k": element 1: array element type 77 is unknown`},
		{"nested too deep", kv(deep, 1), `key 0 "k": ` + strings.Repeat("element 0: ", maxDepth-1) + "arrays nested more than 8 deep"},
		{"too many nested arrays", kv(manyEmpty, 1), `key 0 "k": more than 65536 arrays inside arrays in the file (llama.cpp reads none)`},
		{"alignment type", kv(raw(nil).str(AlignmentKey).u32(uint32(Uint64)).u64(64), 1), `key "general.alignment" is UINT64 64, not UINT32`},
		{"alignment zero", kv(raw(nil).kvU32(AlignmentKey, 0), 1), `key "general.alignment" is 0, not a power of two`},
		{"alignment not power of two", kv(raw(nil).kvU32(AlignmentKey, 48), 1), `key "general.alignment" is 48, not a power of two`},
		{"tensor name beyond file", head(3, 1, 0).u64(1 << 40).zeros(30), "tensor 0: name: string length 1099511627776 exceeds the 1073741824-byte limit"},
		{"tensor name too long", head(3, 1, 0).info(strings.Repeat("n", 64), []uint64{8}, ggml.F32, 0).pad(32).zeros(32), `name is 64 bytes, longer than the 63 llama.cpp allows`},
		{"tensor name not UTF-8", head(3, 1, 0).info("w\xc0", []uint64{8}, ggml.F32, 0).pad(32).zeros(32), `tensor 0 "w\xc0": name is not valid UTF-8`},
		{"duplicate tensor", head(3, 2, 0).info("w", []uint64{8}, ggml.F32, 0).info("w", []uint64{8}, ggml.F32, 32).pad(32).zeros(64), `tensor 1 "w": name appears twice (first as tensor 0)`},
		{"n_dims 0", head(3, 1, 0).str("w").u32(0).u32(0).u64(0).zeros(32), `tensor 0 "w": n_dims 0 is not in 1..4`},
		{"n_dims 5", head(3, 1, 0).info("w", []uint64{1, 1, 1, 1, 1}, ggml.F32, 0).pad(32).zeros(32), `tensor 0 "w": n_dims 5 is not in 1..4`},
		{"dim zero", head(3, 1, 0).info("w", []uint64{8, 0}, ggml.F32, 0).pad(32).zeros(32), `tensor 0 "w": dims[1] is 0`},
		{"element count overflow", head(3, 1, 0).info("w", []uint64{1 << 32, 1 << 31}, ggml.F32, 0).pad(32).zeros(32), `tensor 0 "w": dims [4294967296 2147483648] hold more than 2^63-1 elements`},
		{"dim beyond int64", head(3, 1, 0).info("w", []uint64{1 << 63}, ggml.I8, 0).pad(32).zeros(32), `tensor 0 "w": dims [9223372036854775808] hold more than 2^63-1 elements`},
		{"byte size overflow", head(3, 1, 0).info("w", []uint64{1 << 62}, ggml.F32, 0).pad(32).zeros(32), `tensor 0 "w": dims [4611686018427387904] of F32 take more than 2^63-1 bytes`},
		{"unsupported type", head(3, 1, 0).info("blk.0.ffn_down.weight", []uint64{256}, 40, 0).pad(32).zeros(144), `tensor 0 "blk.0.ffn_down.weight": type NVFP4 is not supported (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, I8, I16, I32, I64, F64, IQ1_M, BF16, TQ1_0, TQ2_0, MXFP4)`},
		{"i-quant row not whole blocks", head(3, 1, 0).info("blk.0.attn_q.weight", []uint64{128, 2}, ggml.IQ2_XXS, 0).pad(32).zeros(132), `tensor 0 "blk.0.attn_q.weight": dims[0] 128 is not a multiple of IQ2_XXS's 256-weight block`},
		{"i-quant data past the end", head(3, 1, 0).info("blk.0.attn_q.weight", []uint64{256, 2}, ggml.IQ1_M, 0).pad(32).zeros(111), `tensor 0 "blk.0.attn_q.weight": data [0, 112) runs past the end of the file`},
		{"MXFP4 data past the end", head(3, 1, 0).info("blk.0.ffn_up.weight", []uint64{64}, ggml.MXFP4, 0).pad(32).zeros(33), `tensor 0 "blk.0.ffn_up.weight": data [0, 34) runs past the end of the file`},
		{"unknown type", head(3, 1, 0).info("w", []uint64{8}, 99, 0).pad(32).zeros(32), `tensor 0 "w": type 99 is not supported (supported: F32,`},
		{"row not whole blocks", head(3, 1, 0).info("w", []uint64{33, 2}, ggml.Q4_0, 0).pad(32).zeros(64), `tensor 0 "w": dims[0] 33 is not a multiple of Q4_0's 32-weight block`},
		{"truncated dims", head(3, 1, 0).str("w").u32(4).u64(8).u64(1).zeros(4), `tensor 0 "w": dims[2]: truncated: 8 bytes needed at offset 53`},
		{"truncated type", head(3, 1, 0).str("w").u32(4).u64(8).u64(1).u64(1).u64(1).zeros(3), `tensor 0 "w": type: truncated`},
		{"truncated offset", head(3, 1, 0).info("w", []uint64{8, 1, 1, 1}, ggml.F32, 0)[:24+9+4+32+4+7], `tensor 0 "w": offset: truncated`},
		{"data section past the end", head(3, 1, 0).info("w", []uint64{8}, ggml.F32, 0).u8(0), "the data section starts at 64 (tensor infos end at 57, padded to the alignment 32), past the end of the 58-byte file"},
		{"offset not aligned", withTensors([]uint64{0, 33}, 96), `tensor 1 "b": offset 33 is not a multiple of the alignment 32`},
		{"offset beyond file", withTensors([]uint64{0, 4096}, 64), `tensor 1 "b": offset 4096 is beyond the end of the file (the data section at 96 holds 64 bytes)`},
		{"first offset not 0", withTensors([]uint64{32}, 64), `tensor 0 "a": offset 32 leaves 32 unused bytes at the start of the data section`},
		{"gap", withTensors([]uint64{0, 64}, 96), `tensor 1 "b": offset 64 leaves 32 unused bytes after tensor 0 "a" (which ends at 32)`},
		{"overlap", withTensors([]uint64{0, 0}, 64), `tensor 1 "b": offset 0 overlaps tensor 0 "a", which spans [0, 32)`},
		{"out of order", withTensors([]uint64{32, 0, 64}, 96), `tensor 0 "a": offset 32 leaves 32 unused bytes at the start`},
		{"before the previous", withTensors([]uint64{0, 32, 0}, 96), `tensor 2 "c": offset 0 comes before tensor 1 "b"'s (32)`},
		{"data past the end", withTensors([]uint64{0, 32}, 60), `tensor 1 "b": data [32, 64) runs past the end of the file: the data section at 96 holds 60 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseBytes(tc.data, "bad.gguf")
			if err == nil {
				t.Fatalf("parsed (%d pairs, %d tensors), want error containing %q", len(f.KV), len(f.Tensors), tc.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "gguf: bad.gguf: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q\nwant it to start with %q and contain %q", msg, "gguf: bad.gguf: ", tc.want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	v2 := withTensors([]uint64{0, 32}, 64)
	binary.LittleEndian.PutUint32(v2[4:], 2)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"version 2", v2},
		{"no tensors, no padding", head(3, 0, 1).kvU32("k", 1)},
		{"nothing", head(3, 0, 0)},
		{"last tensor unpadded", head(3, 1, 0).info("w", []uint64{3}, ggml.F32, 0).pad(32).zeros(12)},
		{"trailing bytes", withTensors([]uint64{0}, 100)},
		{"empty tensor name", head(3, 1, 0).info("", []uint64{1}, ggml.I8, 0).pad(32).zeros(1)},
		{"alignment 32 stated", head(3, 1, 1).kvU32(AlignmentKey, 32).info("w", []uint64{1}, ggml.I8, 0).pad(32).zeros(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseBytes(tc.data, "ok.gguf")
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range f.Tensors {
				if b, err := f.ReadTensor(ti); err != nil || int64(len(b)) != ti.Size {
					t.Errorf("ReadTensor(%q) = %d bytes, %v; want %d", ti.Name, len(b), err, ti.Size)
				}
			}
		})
	}
}

// TestTruncated cuts a valid file at every byte: each prefix must fail
// with a one-line error, none may panic. The last tensor fills its
// alignment, so that no prefix is a complete file.
func TestTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := write(t,
		[]KV{{"general.name", StringValue("tiny")}, {"tokens", StringsValue([]string{"a", "bc", ""})},
			{"nested", mustValue(t, []Value{Float32sValue([]float32{1}), mustValue(t, []bool{true})})},
			{"n", Uint64Value(7)}},
		[]Tensor{randomTensor(rng, "a", ggml.Q8_0, 32), randomTensor(rng, "b", ggml.F16, 16)}, 32)
	if _, err := parseBytes(data, "full.gguf"); err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		_, err := parseBytes(data[:n], "cut.gguf")
		if err == nil {
			t.Fatalf("the first %d of %d bytes parsed", n, len(data))
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "gguf: cut.gguf: ") || strings.Contains(msg, "\n") {
			t.Fatalf("cut at %d: error %q does not name the file on one line", n, msg)
		}
	}
}

func TestGetters(t *testing.T) {
	data := write(t, []KV{
		{"s", StringValue("llama")},
		{"u32", Uint32Value(32)},
		{"u64", Uint64Value(math.MaxUint64)},
		{"i32", Int32Value(-5)},
		{"i8", mustValue(t, int8(3))},
		{"f32", Float32Value(0.25)},
		{"f64", mustValue(t, 1e6)},
		{"b", BoolValue(true)},
		{"ss", StringsValue([]string{"a", "b"})},
		{"fs", Float32sValue([]float32{1, 2})},
		{"is", Int32sValue([]int32{-1, 2})},
		{"u8s", mustValue(t, []uint8{1, 255})},
		{"u32s", mustValue(t, []uint32{1, 1 << 31})},
		{"u64s", mustValue(t, []uint64{1, math.MaxUint64})},
		{"i64s", mustValue(t, []int64{math.MinInt32, math.MaxInt32})},
	}, nil, 0)
	f, err := parseBytes(data, "g.gguf")
	if err != nil {
		t.Fatal(err)
	}
	ok := func(got any, err error) any {
		if err != nil {
			return "error: " + err.Error()
		}
		return got
	}
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"String", ok(f.String("s")), "llama"},
		{"Uint u32", ok(f.Uint("u32")), uint64(32)},
		{"Uint u64", ok(f.Uint("u64")), uint64(math.MaxUint64)},
		{"Uint i8", ok(f.Uint("i8")), uint64(3)},
		{"Int i32", ok(f.Int("i32")), int64(-5)},
		{"Int u32", ok(f.Int("u32")), int64(32)},
		{"Float f32", ok(f.Float("f32")), 0.25},
		{"Float f64", ok(f.Float("f64")), 1e6},
		{"Float u32", ok(f.Float("u32")), 32.0},
		{"Float i32", ok(f.Float("i32")), -5.0},
		{"Bool", ok(f.Bool("b")), true},
		{"Strings", ok(f.Strings("ss")), []string{"a", "b"}},
		{"Float32s", ok(f.Float32s("fs")), []float32{1, 2}},
		{"Int32s i32", ok(f.Int32s("is")), []int32{-1, 2}},
		{"Int32s u8", ok(f.Int32s("u8s")), []int32{1, 255}},
		{"Int32s i64", ok(f.Int32s("i64s")), []int32{math.MinInt32, math.MaxInt32}},
		{"Has", f.Has("s"), true},
		{"Has not", f.Has("nope"), false},
		{"missing", ok(f.String("nope")), `error: gguf: g.gguf: no key "nope"`},
		{"String of u32", ok(f.String("u32")), `error: gguf: g.gguf: key "u32" is UINT32 32, not a string`},
		{"Uint of negative", ok(f.Uint("i32")), `error: gguf: g.gguf: key "i32" is INT32 -5, not a non-negative integer`},
		{"Uint of string", ok(f.Uint("s")), `error: gguf: g.gguf: key "s" is STRING "llama", not a non-negative integer`},
		{"Int beyond int64", ok(f.Int("u64")), `error: gguf: g.gguf: key "u64" is UINT64 18446744073709551615, not an integer within int64`},
		{"Float of bool", ok(f.Float("b")), `error: gguf: g.gguf: key "b" is BOOL true, not a number`},
		{"Bool of u32", ok(f.Bool("u32")), `error: gguf: g.gguf: key "u32" is UINT32 32, not a bool`},
		{"Strings of floats", ok(f.Strings("fs")), `error: gguf: g.gguf: key "fs" is ARRAY of FLOAT32, not an array of strings`},
		{"Float32s of strings", ok(f.Float32s("ss")), `error: gguf: g.gguf: key "ss" is ARRAY of STRING, not an array of FLOAT32`},
		{"Float32s of scalar", ok(f.Float32s("f32")), `error: gguf: g.gguf: key "f32" is FLOAT32 0.25, not an array of FLOAT32`},
		{"Int32s of strings", ok(f.Int32s("ss")), `error: gguf: g.gguf: key "ss" is ARRAY of STRING, not an array of integers`},
		{"Int32s beyond int32", ok(f.Int32s("u32s")), `error: gguf: g.gguf: key "u32s" is ARRAY of UINT32 whose element 1 does not fit int32`},
		{"Int32s beyond int64", ok(f.Int32s("u64s")), `error: gguf: g.gguf: key "u64s" is ARRAY of UINT64 whose element 1 does not fit int32`},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}
	if f.KV[0].Value.Any() != "llama" {
		t.Errorf("Any() = %#v", f.KV[0].Value.Any())
	}
	// The getters copy: the file's view stays the file's.
	s, _ := f.Strings("ss")
	s[0] = "changed"
	if again, _ := f.Strings("ss"); again[0] != "a" {
		t.Errorf("Strings shares its slice with the file")
	}
}

func TestWriteRefuses(t *testing.T) {
	f32 := func(name string, dims ...uint64) Tensor {
		n := uint64(4)
		for _, d := range dims {
			n *= d
		}
		return Tensor{Name: name, Dims: dims, Type: ggml.F32, Data: make([]byte, n)}
	}
	u := Uint32Value(1)
	for _, tc := range []struct {
		name    string
		kv      []KV
		tensors []Tensor
		align   int
		want    string
	}{
		{"alignment not power of two", nil, nil, 48, "alignment 48 is not a power of two below 2^32"},
		{"negative alignment", nil, nil, -32, "alignment -32 is not a power of two"},
		{"empty key", []KV{{"", u}}, nil, 0, "empty key"},
		{"key not UTF-8", []KV{{"\xff", u}}, nil, 0, `key "\xff" is not valid UTF-8`},
		{"duplicate key", []KV{{"a", u}, {"a", u}}, nil, 0, `key "a" given twice`},
		{"zero value", []KV{{"a", Value{}}}, nil, 0, `key "a": empty Value`},
		{"alignment disagrees", []KV{{AlignmentKey, Uint32Value(64)}}, nil, 32, `key "general.alignment" is UINT32 64 but the alignment is UINT32 32`},
		{"alignment wrong type", []KV{{AlignmentKey, Uint64Value(64)}}, nil, 64, `key "general.alignment" is UINT64 64 but the alignment is UINT32 64`},
		{"duplicate tensor", nil, []Tensor{f32("w", 1), f32("w", 1)}, 0, `tensor 1 "w": name given twice`},
		{"long name", nil, []Tensor{f32(strings.Repeat("x", 64), 1)}, 0, `name is 64 bytes, longer than the 63 llama.cpp allows`},
		{"no dims", nil, []Tensor{f32("w")}, 0, `tensor 0 "w": 0 dims, not 1..4`},
		{"five dims", nil, []Tensor{f32("w", 1, 1, 1, 1, 1)}, 0, `tensor 0 "w": 5 dims, not 1..4`},
		{"zero dim", nil, []Tensor{f32("w", 2, 0)}, 0, `tensor 0 "w": dims[1] is 0`},
		{"data length", nil, []Tensor{{Name: "w", Dims: []uint64{2}, Type: ggml.F16, Data: make([]byte, 5)}}, 0, `tensor 0 "w": 5 bytes of data but dims [2] of F16 take 4`},
		{"unsupported type", nil, []Tensor{{Name: "w", Dims: []uint64{256}, Type: 40, Data: nil}}, 0, `tensor 0 "w": type NVFP4 is not supported`},
		{"i-quant data length", nil, []Tensor{{Name: "w", Dims: []uint64{256}, Type: ggml.IQ3_S, Data: make([]byte, 98)}}, 0, `tensor 0 "w": 98 bytes of data but dims [256] of IQ3_S take 110`},
		{"partial block", nil, []Tensor{{Name: "w", Dims: []uint64{16}, Type: ggml.Q4_0, Data: make([]byte, 9)}}, 0, `dims[0] 16 is not a multiple of Q4_0's 32-weight block`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.kv, tc.tensors, tc.align)
			if err == nil || !strings.HasPrefix(err.Error(), "gguf: write: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before refusing", buf.Len())
			}
		})
	}
}

func TestValueOf(t *testing.T) {
	arr := Int32sValue(nil)
	tooDeep := arr
	for range maxDepth {
		tooDeep = Value{[]Value{tooDeep}}
	}
	for _, tc := range []struct {
		name string
		x    any
		want string // "" when accepted
	}{
		{"uint16", uint16(1), ""},
		{"array of arrays", []Value{arr, StringsValue([]string{"a"})}, ""},
		{"deepest allowed", tooDeep.x.([]Value)[0].x, ""},
		{"int", 1, "gguf: int is not a GGUF value type"},
		{"nil", nil, "gguf: <nil> is not a GGUF value type"},
		{"slice of any", []any{1}, "gguf: []interface {} is not a GGUF value type"},
		{"scalar in array of arrays", []Value{arr, Uint32Value(1)}, "gguf: element 1 of an array of arrays is UINT32, not an array"},
		{"too deep", tooDeep.x, "arrays nested more than 8 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValueOf(tc.x)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("ValueOf(%T) error %v, want %q", tc.x, err, tc.want)
			}
		})
	}
}

func TestValueString(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{Uint32Value(7), "7"},
		{Float32Value(0.5), "0.5"},
		{BoolValue(false), "false"},
		{StringValue("a\"b"), `"a\"b"`},
		{StringValue(strings.Repeat("é", 40)), `"` + strings.Repeat("é", 30) + `"...`},
		{StringsValue([]string{"a", "b"}), `[2]STRING{"a", "b"}`},
		{StringsValue([]string{"1", "2", "3", "4", "5", "6", "7"}), `[7]STRING{"1", "2", "3", "4", "5", "6", ...}`},
		{Int32sValue([]int32{1, -2}), `[2]INT32{1 -2}`},
		{Float32sValue([]float32{1, 2, 3, 4, 5, 6, 7, 8}), `[8]FLOAT32{1 2 3 4 5 6 ...}`},
		{mustValue(t, []Value{Int32sValue(nil)}), `[1]ARRAY{[0]INT32{}}`},
		{Value{}, "<no value>"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
	if got := Array.String() + " " + ValueType(99).String() + " " + (Value{}).Type().String(); got != "ARRAY value type 99 no value" {
		t.Errorf("ValueType names: %s", got)
	}
}

func TestShape(t *testing.T) {
	ti := TensorInfo{Dims: []uint64{4096, 32000}}
	if got := ti.Shape(); !slices.Equal(got, []int{32000, 4096}) {
		t.Errorf("Shape() = %v, want [32000 4096]", got)
	}
}

func TestOpen(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := randomTensor(rng, "w", ggml.Q4_0, 64, 2)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, write(t, []KV{{"general.architecture", StringValue("qwen2")}}, []Tensor{w}, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor("w")
	if !ok || f.Path != path {
		t.Fatalf("Tensor(w) = %v, %v; Path %q", ti, ok, f.Path)
	}
	ti.Dims[0] = 1 // a copy: the file's view must not change
	if f.Tensors[0].Dims[0] != 64 {
		t.Errorf("Tensor returned the file's own Dims")
	}
	ti, _ = f.Tensor("w")
	if got, err := f.ReadTensor(ti); err != nil || !bytes.Equal(got, w.Data) {
		t.Errorf("ReadTensor after Open: %d bytes, %v", len(got), err)
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Errorf("Tensor(nope) found")
	}
	ti.Offset++
	if _, err := f.ReadTensor(ti); err == nil || !strings.Contains(err.Error(), `tensor "w" at offset`) {
		t.Errorf("ReadTensor of a moved tensor: %v", err)
	}

	missing := filepath.Join(t.TempDir(), "missing.gguf")
	if _, err := Open(missing); err == nil || err.Error() != "gguf: "+missing+": no such file or directory" {
		t.Errorf("Open(missing) = %v", err)
	}
	dir := t.TempDir()
	if _, err := Open(dir); err == nil || err.Error() != "gguf: "+dir+": not a regular file" {
		t.Errorf("Open(dir) = %v", err)
	}
	if err := os.WriteFile(path, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.HasPrefix(err.Error(), "gguf: "+path+": version: truncated") {
		t.Errorf("Open(truncated) = %v", err)
	}
}

// TestShortReader: a reader that holds fewer bytes than the size it was
// given fails as a read error, not a panic or a parsed file.
func TestShortReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	data := write(t, []KV{{"general.name", StringValue("x")}}, []Tensor{randomTensor(rng, "w", ggml.F32, 8)}, 0)
	for _, n := range []int{30, len(data) - 1} {
		f, err := Parse(bytes.NewReader(data[:n]), int64(len(data)), "short.gguf")
		if n < len(data)-32 {
			if err == nil || !strings.Contains(err.Error(), "reading at offset") || !strings.Contains(err.Error(), "unexpected EOF") {
				t.Errorf("header cut at %d: %v", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadTensor(f.Tensors[0]); err == nil || !strings.Contains(err.Error(), `gguf: short.gguf: reading tensor "w": unexpected EOF`) {
			t.Errorf("ReadTensor past the reader's end: %v", err)
		}
	}
}

// virtual is a file of size bytes: prefix, then zeros, never stored.
type virtual struct {
	prefix []byte
	size   int64
}

func (v virtual) ReadAt(p []byte, off int64) (int, error) {
	if off >= v.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), v.size-off))
	clear(p[:n])
	if off < int64(len(v.prefix)) {
		copy(p, v.prefix[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestHugeCountsAllocateLittle: counts that a terabyte file could hold
// are not trusted to size anything before the items are read.
func TestHugeCountsAllocateLittle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix []byte
		want   string
	}{
		{"tensor_count", head(3, 1<<34, 0), `tensor 0 "": n_dims 0 is not in 1..4`},
		{"kv_count", head(3, 0, 1<<35), "key 0 is empty"},
		{"string array", head(3, 0, 1).str("k").u32(uint32(Array)).u32(uint32(String)).u64(1 << 29).str("a").u64(1 << 31), "element 1: string length 2147483648 exceeds the 1073741824-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Parse(virtual{tc.prefix, 1 << 40}, 1<<40, "huge.gguf")
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
				t.Errorf("allocated %d bytes", got)
			}
		})
	}
}
