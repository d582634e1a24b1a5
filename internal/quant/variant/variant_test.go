package variant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/synthtest"
	"logitscope/internal/quant"
)

func tinyCheckpoint(t *testing.T, seed uint64) *checkpoint.Checkpoint {
	t.Helper()
	return synthtest.Checkpoint(t, synth.Presets["tiny"], seed)
}

// Every tensor reads back as the quantizer's dequantization of the
// checkpoint's values (matrices) or the values themselves (vectors), also
// when small shards force matrices to be split by rows.
func TestWriteOpenRoundTrip(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	for _, maxShard := range []int{0, 4096} {
		for _, s := range quant.Schemes {
			t.Run(fmt.Sprintf("%s/shard%d", s, maxShard), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), string(s))
				if err := Write(ck, s, dir, Options{MaxShardBytes: maxShard}); err != nil {
					t.Fatal(err)
				}
				v, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := v.CheckSource(fingerprint(t, ck)); err != nil {
					t.Fatal(err)
				}
				if maxShard > 0 {
					if len(v.Manifest.Shards) < 10 || len(v.Manifest.Tensors) <= len(v.Names()) {
						t.Fatalf("%d shards, %d pieces for %d tensors: nothing was split", len(v.Manifest.Shards), len(v.Manifest.Tensors), len(v.Names()))
					}
				}
				limit := int64(maxShard)
				if limit == 0 {
					limit = MaxShardBytes
				}
				for _, sh := range v.Manifest.Shards {
					if sh.Size > limit {
						t.Fatalf("shard %s is %d bytes", sh.Name, sh.Size)
					}
				}
				for _, name := range ck.Names() {
					want, shape, _ := ck.Float32(name)
					got, gotShape, err := v.Float32(name)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(shape) != fmt.Sprint(gotShape) {
						t.Fatalf("%s: shape %v, want %v", name, gotShape, shape)
					}
					if len(shape) == 1 {
						if fmt.Sprint(got) != fmt.Sprint(want) {
							t.Fatalf("%s: a float tensor changed", name)
						}
						continue
					}
					deq := make([]float32, len(want))
					blob, _ := quant.Quantize(s, want, shape[0], shape[1])
					quant.Dequantize(s, blob, shape[0], shape[1], deq)
					for i := range deq {
						if math.Float32bits(deq[i]) != math.Float32bits(got[i]) {
							t.Fatalf("%s[%d] = %g, the quantizer gives %g", name, i, got[i], deq[i])
						}
					}
				}
			})
		}
	}
}

func TestWriteDeterministic(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	read := func() []byte {
		dir := filepath.Join(t.TempDir(), "q4")
		if err := Write(ck, quant.Q4, dir, Options{}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
		return b
	}
	if a, b := read(), read(); !bytes.Equal(a, b) {
		t.Fatal("two quantizations of one checkpoint differ")
	}
}

// Tampering is refused with an error naming the file.
func TestOpenRefuses(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	cases := []struct {
		name   string
		damage func(dir string)
		want   string
	}{
		{"corrupt shard byte", func(dir string) {
			p := filepath.Join(dir, "shard-00001.bin")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o644)
		}, "shard-00001.bin: sha256"},
		{"truncated shard", func(dir string) {
			p := filepath.Join(dir, "shard-00001.bin")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-4], 0o644)
		}, "shard-00001.bin: "},
		{"missing shard", func(dir string) { os.Remove(filepath.Join(dir, "shard-00001.bin")) }, "shard-00001.bin"},
		{"forged manifest", func(dir string) {
			p := filepath.Join(dir, "manifest.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"offset": 0`), []byte(`"offset": 4`), 1), 0o644)
		}, "manifest.json: manifest_sha256 is"},
		{"unsealed manifest", func(dir string) {
			p := filepath.Join(dir, "manifest.json")
			b, _ := os.ReadFile(p)
			i := bytes.Index(b, []byte(`"manifest_sha256"`))
			os.WriteFile(p, append(b[:i], []byte(`"x": 1}`)...), 0o644)
		}, "manifest.json: not sealed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q8")
			if err := Write(ck, quant.Q8, dir, Options{}); err != nil {
				t.Fatal(err)
			}
			c.damage(dir)
			_, err := Open(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, c.want)
			}
		})
	}
}

func TestCheckSourceRefusesOtherCheckpoint(t *testing.T) {
	a, b := tinyCheckpoint(t, 0), tinyCheckpoint(t, 1)
	dir := filepath.Join(t.TempDir(), "q4")
	if err := Write(a, quant.Q4, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.CheckSource(fingerprint(t, b)); err == nil || !strings.Contains(err.Error(), "quantized from another checkpoint") {
		t.Fatalf("err = %v", err)
	}
}

// A failed write leaves the previous variant in place.
func TestWriteKeepsOldVariantOnError(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	dir := filepath.Join(t.TempDir(), "q4")
	if err := Write(ck, quant.Q4, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := Write(ck, quant.Q4, dir, Options{Progress: func(done, total int, name string) {
		if done == 3 {
			os.Remove(ck.Dir + "/model.safetensors") // the shard file stays open: make the next tensor fail instead
			ck.Close()
		}
	}}); err == nil {
		t.Fatal("write over a closed checkpoint succeeded")
	}
	after, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if !bytes.Equal(before, after) {
		t.Fatal("a failed write changed the existing variant")
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
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

// A write removes the temporary directories of its own scheme that a
// killed quantize left, and nothing that may be another's or in use.
func TestWriteRemovesStaleTemporaries(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	parent := t.TempDir()
	dead := deadPID(t)
	stale := fmt.Sprintf(".q6.tmp%d-123", dead)
	keep := []string{
		".q6.tmp1-123",                      // pid 1 is alive: in use
		fmt.Sprintf(".q4.tmp%d-123", dead),  // another scheme's
		".q6.tmp123",                        // an older version's: its writer cannot be told
		fmt.Sprintf(".q6.tmp%d-12x", dead),  // not our pattern
		fmt.Sprintf("q6.tmp%d-123", dead),   // not hidden: not ours
		fmt.Sprintf(".q6.tmp%d-123x", dead), // not our pattern
	}
	for _, name := range append([]string{stale}, keep...) {
		if err := os.MkdirAll(filepath.Join(parent, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(parent, name, "shard-00001.bin"), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(ck, quant.Q6, filepath.Join(parent, "q6"), Options{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := append([]string{"q6"}, keep...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the write: %q\nwant %q", got, want)
	}
}

func FuzzParseManifest(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "tiny")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		f.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	defer ck.Close()
	if err := Write(ck, quant.Q6, filepath.Join(dir, "q6"), Options{MaxShardBytes: 8192}); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(filepath.Join(dir, "q6", "manifest.json"))
	f.Add(seed)
	f.Add([]byte(`{"format":"logitscope.variant/1","scheme":"q4","group_size":32,"tensors":[{"name":"w","scheme":"q4","shape":[2,40],"rows":[0,2],"shard":"s","offset":0,"length":48}],"shards":[{"name":"s","size":48}]}`))
	for _, m := range []Manifest{
		f32Manifest("s", 0, "s", 8, Shard{Name: "s", Size: 16}),
		f32Manifest("s", 0, "s", 0, Shard{Name: "s", Size: 16}),
		f32Manifest("s", 0, "s", 1<<63-9, Shard{Name: "s", Size: 1<<63 - 1}),
	} {
		data, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parse(data)
		if err != nil {
			return
		}
		// Whatever parses is internally consistent: every piece has the
		// length its scheme implies and lies inside its shard.
		size := map[string]int64{}
		for _, s := range m.Shards {
			size[s.Name] = s.Size
		}
		for _, p := range m.Tensors {
			want, err := p.expectedLength()
			if err != nil || want != p.Length || p.Offset+p.Length > size[p.Shard] {
				t.Fatalf("accepted an inconsistent piece %+v", p)
			}
		}
		// and the pieces tile their shards: pairwise disjoint, together
		// exactly as long as the shard.
		covered := map[string]int64{}
		for i, p := range m.Tensors {
			covered[p.Shard] += p.Length
			for _, q := range m.Tensors[:i] {
				if p.Shard == q.Shard && p.Offset < q.Offset+q.Length && q.Offset < p.Offset+p.Length {
					t.Fatalf("accepted overlapping pieces %+v and %+v", q, p)
				}
			}
		}
		for _, s := range m.Shards {
			if covered[s.Name] != s.Size {
				t.Fatalf("accepted shard %s of %d bytes whose pieces cover %d", s.Name, s.Size, covered[s.Name])
			}
		}
	})
}

func fingerprint(t *testing.T, ck *checkpoint.Checkpoint) string {
	fp, err := ck.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// Ensure keeps a variant of the checkpoint's own weights and quantizes
// again one made from other weights (the model's files changed since).
func TestEnsureQuantizesAgainForOtherWeights(t *testing.T) {
	a, b := tinyCheckpoint(t, 0), tinyCheckpoint(t, 1)
	dir, err := Ensure(a, quant.Q4, nil)
	if err != nil {
		t.Fatal(err)
	}
	// b's default variant directory takes a's variant.
	other := DefaultDir(b.Dir, "q4")
	if err := os.CopyFS(other, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if got, err := Ensure(b, quant.Q4, &log); err != nil || got != other {
		t.Fatalf("Ensure: %s, %v", got, err)
	}
	if !strings.Contains(log.String(), "was quantized from other weights") {
		t.Errorf("the log says %q", log.String())
	}
	v, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.CheckSource(fingerprint(t, b)); err != nil {
		t.Error(err)
	}
	log.Reset()
	if _, err := Ensure(b, quant.Q4, &log); err != nil || log.Len() != 0 {
		t.Errorf("a variant of the checkpoint's own weights: %v, log %q", err, log.String())
	}
}
