package variant

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/seal"
	"logitscope/internal/quant"
)

// f32Manifest is a manifest of two f32 vectors a and b of 2 values (8
// bytes) each, laid out as given.
func f32Manifest(aShard string, aOff int64, bShard string, bOff int64, shards ...Shard) Manifest {
	piece := func(name, shard string, off int64) Piece {
		return Piece{Name: name, Scheme: SchemeF32, Shape: []int{2}, Rows: [2]int{0, 2}, Shard: shard, Offset: off, Length: 8}
	}
	return Manifest{Format: Format, Scheme: "q4", GroupSize: quant.GroupSize,
		Tensors: []Piece{piece("a", aShard, aOff), piece("b", bShard, bOff)}, Shards: shards}
}

// Pieces must tile their shards: a byte read by two pieces decodes one
// tensor's weights as another's, and a byte read by none means the manifest
// does not describe the shard it seals. Offsets and sizes near 2^63 must
// neither overflow the checks nor print wrapped numbers.
func TestParseManifestTiling(t *testing.T) {
	const maxI64 = 1<<63 - 1
	s := func(name string, size int64) Shard { return Shard{Name: name, Size: size} }
	cases := []struct {
		name string
		m    Manifest
		want string // "" for a manifest that must parse
	}{
		{"tiled", f32Manifest("s", 0, "s", 8, s("s", 16)), ""},
		{"tiled out of order", f32Manifest("s", 8, "s", 0, s("s", 16)), ""},
		{"two shards", f32Manifest("s", 0, "t", 0, s("s", 8), s("t", 8)), ""},
		{"same bytes", f32Manifest("s", 0, "s", 0, s("s", 16)),
			"shard s: tensors[1] (b) bytes [0, 8) overlap tensors[0] (a) bytes [0, 8)"},
		{"partly the same bytes", f32Manifest("s", 4, "s", 0, s("s", 16)),
			"shard s: tensors[0] (a) bytes [4, 12) overlap tensors[1] (b) bytes [0, 8)"},
		{"hole between", f32Manifest("s", 0, "s", 12, s("s", 20)),
			"shard s: bytes [8, 12) belong to no piece (between tensors[0] (a) and tensors[1] (b))"},
		{"hole before", f32Manifest("s", 8, "s", 16, s("s", 24)),
			"shard s: bytes [0, 8) belong to no piece (before tensors[0] (a))"},
		{"hole after", f32Manifest("s", 0, "s", 8, s("s", 20)),
			"shard s: bytes [16, 20) belong to no piece (after tensors[1] (b))"},
		{"shard without pieces", f32Manifest("s", 0, "s", 8, s("s", 16), s("t", 4)),
			"shard t: bytes [0, 4) belong to no piece"},
		{"offset near 2^63", f32Manifest("s", 0, "s", maxI64, s("s", 16)),
			"tensors[1] (b): bytes [9223372036854775807, 9223372036854775815) are outside s (16 bytes)"},
		{"offset and size near 2^63", f32Manifest("s", 0, "s", maxI64-8, s("s", maxI64)),
			"shard s: bytes [8, 9223372036854775799) belong to no piece (between tensors[0] (a) and tensors[1] (b))"},
		{"negative offset", f32Manifest("s", 0, "s", -8, s("s", 16)),
			"tensors[1] (b): offset -8 is negative"},
		{"size that wraps", f32Manifest("s", 0, "s", 8, s("s", -1<<63)),
			"shard s: size -9223372036854775808 is negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := json.Marshal(c.m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = parse(data)
			if c.want == "" {
				if err != nil {
					t.Fatalf("a tiled manifest was refused: %v", err)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// The finding as reported: one tensor's offset pointed at another's bytes
// and the manifest resealed; Open accepted it and served the other weights.
func TestOpenRefusesOverlapResealed(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	dir := filepath.Join(t.TempDir(), "q8")
	if err := Write(ck, quant.Q8, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := v.Manifest
	a, b := -1, -1
	for i := range m.Tensors {
		for j := range i {
			if m.Tensors[i].Name != m.Tensors[j].Name && m.Tensors[i].Length == m.Tensors[j].Length && m.Tensors[i].Shard == m.Tensors[j].Shard {
				a, b = j, i
			}
		}
	}
	if a < 0 {
		t.Fatal("no two pieces of one length in one shard to alias")
	}
	m.Tensors[b].Offset = m.Tensors[a].Offset
	data, err := seal.Marshal(m, "manifest_sha256", func(s string) { m.Seal = s })
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	pa, pb := m.Tensors[a], m.Tensors[b]
	for _, want := range []string{path, "shard " + pa.Shard, pa.Name, pb.Name, "overlap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to name %q", err, want)
		}
	}
}
