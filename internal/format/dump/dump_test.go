package dump

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/routing"
	"logitscope/internal/format/safetensors"
)

// golden is 2 rows × 3 vocab: {1, -2, 0.5}, {+Inf, 0, -0.25}, spelled out
// byte by byte so the test does not trust Write to define the format.
const golden = "0200000000000000" + "0300000000000000" +
	"0000803f" + "000000c0" + "0000003f" +
	"0000807f" + "00000000" + "000080be"

func goldenLogits() *Logits {
	return &Logits{Rows: 2, Vocab: 3, Data: []float32{1, -2, 0.5, float32(math.Inf(1)), 0, -0.25}}
}

func TestWriteGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, goldenLogits()); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(buf.Bytes()); got != golden {
		t.Fatalf("bytes\n got %s\nwant %s", got, golden)
	}
	file, err := os.ReadFile("testdata/golden.dump")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, buf.Bytes()) {
		t.Fatal("testdata/golden.dump differs from the hand-written bytes")
	}
}

func TestReadGolden(t *testing.T) {
	l, err := ReadFile("testdata/golden.dump")
	if err != nil {
		t.Fatal(err)
	}
	want := goldenLogits()
	if l.Rows != want.Rows || l.Vocab != want.Vocab || fmt.Sprint(l.Data) != fmt.Sprint(want.Data) {
		t.Fatalf("got %d×%d %v, want %d×%d %v", l.Rows, l.Vocab, l.Data, want.Rows, want.Vocab, want.Data)
	}
	if fmt.Sprint(l.Row(1)) != fmt.Sprint(want.Data[3:]) {
		t.Fatalf("Row(1) = %v", l.Row(1))
	}
}

func TestReadErrors(t *testing.T) {
	g, _ := hex.DecodeString(golden)
	hdr := func(rows, vocab uint64) []byte {
		b := make([]byte, 16)
		for i := 0; i < 8; i++ {
			b[i] = byte(rows >> (8 * i))
			b[8+i] = byte(vocab >> (8 * i))
		}
		return b
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated dump: 0 bytes"},
		{"short header", g[:9], "truncated dump: 9 bytes"},
		{"truncated rows", g[:len(g)-1], "truncated dump: header says 2 rows × 3 vocab (40 bytes), file has 39 bytes"},
		{"trailing", append(append([]byte{}, g...), 0, 0, 0, 0), "4 trailing bytes"},
		{"zero vocab", hdr(1, 0), "vocab 0"},
		{"absurd", hdr(1<<40, 151936), "too large"},
		{"overflow", hdr(1<<63, 1<<63), "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.dump")
			os.WriteFile(path, c.data, 0o644)
			_, err := ReadFile(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, path, c.want)
			}
		})
	}
}

func TestZeroRows(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, &Logits{Rows: 0, Vocab: 5}); err != nil {
		t.Fatal(err)
	}
	l, err := Read(&buf, 16, "zero")
	if err != nil || l.Rows != 0 || l.Vocab != 5 {
		t.Fatalf("got %+v, %v", l, err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.dump")
	bad := &Logits{Rows: 2, Vocab: 3, Data: []float32{1}}
	if err := WriteFile(path, bad); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("err = %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a failed write left %v behind", ents)
	}
	if err := WriteFile(path, goldenLogits()); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("want only the dump, got %v", ents)
	}
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A write removes the temporaries of its own path that a killed writer
// left, and nothing that may be another's or in use.
func TestWriteFileRemovesStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	dead := deadPID(t)
	stale := fmt.Sprintf(".out.dump.tmp%d-123", dead)
	keep := []string{
		".out.dump.tmp1-123",                                  // pid 1 is alive: in use
		fmt.Sprintf(".other.dump.tmp%d-123", dead),            // another dump's
		fmt.Sprintf(".out.dump.receipt.json.tmp%d-123", dead), // the receipt's: its writer removes it
		".out.dump.tmp123",                                    // an older version's: its writer cannot be told
		fmt.Sprintf(".out.dump.tmp%d-12x", dead),              // not our pattern
		fmt.Sprintf("out.dump.tmp%d-123", dead),               // not hidden: not ours
	}
	for _, name := range append([]string{stale}, keep...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(filepath.Join(dir, "out.dump"), goldenLogits()); err != nil {
		t.Fatal(err)
	}
	var got []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := append([]string{"out.dump"}, keep...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the write: %q\nwant %q", got, want)
	}
}

func FuzzRead(f *testing.F) {
	g, _ := hex.DecodeString(golden)
	f.Add(g)
	f.Add(g[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Read(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, l); err != nil || !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("re-encoding a valid dump changed it: %v", err)
		}
	})
}

func ExampleWrite() {
	var buf bytes.Buffer
	Write(&buf, &Logits{Rows: 1, Vocab: 2, Data: []float32{1, 2}})
	size := int64(buf.Len())
	l, _ := Read(&buf, size, "example")
	fmt.Println(size, l.Rows, l.Vocab, l.Row(0))
	// Output: 24 1 2 [1 2]
}

func TestSafetensorsLogits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	if err := WriteSafetensors(path, goldenLogits(), map[string]string{"window": "0"}); err != nil {
		t.Fatal(err)
	}
	l, meta, err := ReadAny(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Rows != 2 || l.Vocab != 3 || fmt.Sprint(l.Data) != fmt.Sprint(goldenLogits().Data) || meta["window"] != "0" {
		t.Fatalf("got %+v %v", l, meta)
	}
	// A file without a logits tensor, or with a 1-D one, is refused by name.
	bad := filepath.Join(dir, "bad.safetensors")
	safetensors.WriteFile(bad, []safetensors.Tensor{{Name: "x", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)}}, nil)
	if _, _, err := ReadAny(bad); err == nil || !strings.Contains(err.Error(), `no "logits" tensor (has x)`) {
		t.Fatalf("err = %v", err)
	}
	safetensors.WriteFile(bad, []safetensors.Tensor{{Name: "logits", DType: safetensors.I32, Shape: []int{1, 1}, Data: make([]byte, 4)}}, nil)
	if _, _, err := ReadAny(bad); err == nil || !strings.Contains(err.Error(), "is I32") {
		t.Fatalf("err = %v", err)
	}
}

// moeLogits is goldenLogits with routes: 2 rows, sparse layers 1 and 3,
// top-2 of 4 experts.
func moeLogits() *Logits {
	l := goldenLogits()
	l.Routes = &routing.Routes{Layout: routing.Layout{Layers: []int{1, 3}, TopK: 2, Experts: 4}, Rows: 2,
		IDs: []int32{3, 0, 1, 2, 0, 1, 2, 3}}
	return l
}

// A mixture of experts' dump keeps its routes, labelled, through
// safetensors, whichever way it is written; a binary dump keeps the
// logits alone, as existing tools expect.
func TestRoutesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.safetensors", "b.SAFETENSORS"} {
		path := filepath.Join(dir, name)
		if err := WriteFile(path, moeLogits()); err != nil {
			t.Fatal(err)
		}
		l, meta, err := ReadAny(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflectEqual(l, moeLogits()) {
			t.Fatalf("%s: read back %+v routes %+v", name, l, l.Routes)
		}
		if meta[RouteLayers] != "1,3" || meta[RouteExperts] != "4" {
			t.Fatalf("%s: metadata %v", name, meta)
		}
	}
	// WriteSafetensors keeps the caller's metadata beside the labels.
	path := filepath.Join(dir, "w.safetensors")
	if err := WriteSafetensors(path, moeLogits(), map[string]string{"window": "0"}); err != nil {
		t.Fatal(err)
	}
	if l, meta, err := ReadAny(path); err != nil || meta["window"] != "0" || l.Routes == nil {
		t.Fatalf("got %+v %v %v", l, meta, err)
	}
	if err := WriteSafetensors(path, moeLogits(), map[string]string{RouteLayers: "0"}); err == nil || !strings.Contains(err.Error(), "metadata route_layers is the routes' label") {
		t.Fatalf("the caller's route_layers: %v", err)
	}
	bin := filepath.Join(dir, "x.dump")
	if err := WriteFile(bin, moeLogits()); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/golden.dump")
	if got, _ := os.ReadFile(bin); !bytes.Equal(got, want) {
		t.Fatal("a binary dump with routes is not the golden logits-only dump")
	}
	// A dense model's safetensors dump is what it was before routes.
	plain := filepath.Join(dir, "plain.safetensors")
	if err := WriteFile(plain, goldenLogits()); err != nil {
		t.Fatal(err)
	}
	if l, meta, err := ReadAny(plain); err != nil || l.Routes != nil || len(meta) != 0 {
		t.Fatalf("dense: %+v %v %v", l, meta, err)
	}
}

func reflectEqual(a, b *Logits) bool {
	return fmt.Sprintf("%v %d %d %+v", a.Data, a.Rows, a.Vocab, a.Routes) == fmt.Sprintf("%v %d %d %+v", b.Data, b.Rows, b.Vocab, b.Routes)
}

// Routes a reader could not label, or that are not expert ids, are
// refused naming the file and the field.
func TestRoutesErrors(t *testing.T) {
	logits := safetensors.Tensor{Name: LogitsTensor, DType: safetensors.F32, Shape: []int{2, 3}, Data: safetensors.EncodeF32(goldenLogits().Data)}
	routes := func(dtype safetensors.DType, shape []int, ids ...int32) safetensors.Tensor {
		data := safetensors.EncodeI32(ids)
		if dtype != safetensors.I32 {
			data = safetensors.EncodeF32(make([]float32, len(ids)))
		}
		return safetensors.Tensor{Name: RoutesTensor, DType: dtype, Shape: shape, Data: data}
	}
	good := []int32{3, 0, 1, 2, 0, 1, 2, 3}
	labels := map[string]string{RouteLayers: "1,3", RouteExperts: "4"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range labels {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name   string
		routes safetensors.Tensor
		meta   map[string]string
		want   string
	}{
		{"dtype", routes(safetensors.F32, []int{2, 2, 2}, good...), labels, `"routes" is F32, want I32`},
		{"rows", routes(safetensors.I32, []int{1, 2, 4}, good...), labels, `"routes" has shape [1 2 4], want (2 rows, sparse layers, top-k)`},
		{"2-D", routes(safetensors.I32, []int{2, 4}, good...), labels, `has shape [2 4]`},
		{"no layers", routes(safetensors.I32, []int{2, 2, 2}, good...), with(RouteLayers, ""), `"routes" has no route_layers metadata`},
		{"bad layers", routes(safetensors.I32, []int{2, 2, 2}, good...), with(RouteLayers, "1;3"), `metadata route_layers "1;3": layer "1;3" is not a decimal number`},
		{"layer count", routes(safetensors.I32, []int{2, 2, 2}, good...), with(RouteLayers, "1"), `names 1 layers, "routes" has 2`},
		{"unordered layers", routes(safetensors.I32, []int{2, 2, 2}, good...), with(RouteLayers, "3,1"), `routes: layers [3 1]`},
		{"no experts", routes(safetensors.I32, []int{2, 2, 2}, good...), with(RouteExperts, ""), `metadata route_experts "": want the number of experts`},
		{"expert range", routes(safetensors.I32, []int{2, 2, 2}, 3, 0, 1, 2, 0, 1, 2, 4), labels, `routes: row 1, layer 3: expert 4 is outside the 4 experts`},
		{"negative expert", routes(safetensors.I32, []int{2, 2, 2}, 3, -1, 1, 2, 0, 1, 2, 3), labels, `row 0, layer 1: expert -1`},
		{"twice", routes(safetensors.I32, []int{2, 2, 2}, 3, 3, 1, 2, 0, 1, 2, 3), labels, `expert 3 chosen twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.safetensors")
			if err := safetensors.WriteFile(path, []safetensors.Tensor{logits, c.routes}, c.meta); err != nil {
				t.Fatal(err)
			}
			_, _, err := ReadAny(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, path, c.want)
			}
		})
	}
	// Writing checks the routes against the logits as well.
	l := moeLogits()
	l.Routes.Rows = 1
	if err := WriteSafetensors(filepath.Join(t.TempDir(), "w.safetensors"), l, nil); err == nil || !strings.Contains(err.Error(), "1 rows of routes for 2 rows of logits") {
		t.Fatalf("write: %v", err)
	}
}

func FuzzParseSafetensors(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.safetensors")
	WriteSafetensors(path, goldenLogits(), map[string]string{"k": "v"})
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	// A mixture of experts' dump: the routes tensor and its labels.
	WriteSafetensors(path, moeLogits(), nil)
	seed, _ = os.ReadFile(path)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		l, _, err := ParseSafetensors(data, "fuzz")
		if err != nil {
			return
		}
		if l.Rows*l.Vocab != len(l.Data) {
			t.Fatalf("%d×%d logits with %d values", l.Rows, l.Vocab, len(l.Data))
		}
		if rt := l.Routes; rt != nil {
			if rt.Rows != l.Rows || rt.Check("fuzz") != nil {
				t.Fatalf("routes %+v for %d rows parsed: %v", rt, l.Rows, rt.Check("fuzz"))
			}
			// What parses writes back and reads as the same.
			var buf bytes.Buffer
			if err := writeSafetensors(&buf, l, nil); err != nil {
				t.Fatalf("parsed routes do not write: %v", err)
			}
			again, _, err := ParseSafetensors(buf.Bytes(), "again")
			if err != nil || !reflectEqual(again, l) {
				t.Fatalf("routes changed through a write: %v", err)
			}
		}
	})
}

// WriteRows writes rows held apart as Write writes them whole, and
// refuses a row of another width.
func TestWriteRows(t *testing.T) {
	l := &Logits{Rows: 2, Vocab: 3, Data: []float32{1, 2, 3, -4, 5, float32(math.Inf(1))}}
	var whole, apart bytes.Buffer
	if err := Write(&whole, l); err != nil {
		t.Fatal(err)
	}
	if err := WriteRows(&apart, 3, [][]float32{l.Row(0), l.Row(1)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole.Bytes(), apart.Bytes()) {
		t.Fatal("WriteRows wrote other bytes than Write")
	}
	if err := WriteRows(io.Discard, 3, [][]float32{{1, 2, 3}, {4, 5}}); err == nil || !strings.Contains(err.Error(), "row 1 has 2 logits, not 3") {
		t.Fatalf("a short row: %v", err)
	}
}
