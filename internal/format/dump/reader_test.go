package dump

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A Reader gives the rows of every source in order, a block at a time,
// whatever the block's size: the same rows as reading the whole capture.
func TestReaderBlocks(t *testing.T) {
	dir := t.TempDir()
	want := &Logits{Rows: 7, Vocab: 5, Data: make([]float32, 35)}
	for i := range want.Data {
		want.Data[i] = float32(i)*0.25 - 3
	}
	bin, st := filepath.Join(dir, "x.dump"), filepath.Join(dir, "x.safetensors")
	for _, p := range []string{bin, st} {
		if err := WriteFile(p, want); err != nil {
			t.Fatal(err)
		}
	}
	open := map[string]func() (*Reader, error){
		"binary":      func() (*Reader, error) { return Open(bin) },
		"safetensors": func() (*Reader, error) { return Open(st) },
		"memory":      func() (*Reader, error) { return want.Reader("mem"), nil },
	}
	for name, o := range open {
		for _, block := range []int{1, 3, 7, 10} {
			r, err := o()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if r.Rows != 7 || r.Vocab != 5 {
				t.Fatalf("%s: %d × %d", name, r.Rows, r.Vocab)
			}
			hashed := block != 3 // a reader not asked to Hash has no sum
			if hashed {
				r.Hash()
			}
			var got []float32
			var buf []float32
			for {
				rows, err := r.Next(block, buf)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s, block %d: %v", name, block, err)
				}
				if len(rows)%5 != 0 || len(rows) > block*5 {
					t.Fatalf("%s, block %d: %d values", name, block, len(rows))
				}
				got = append(got, rows...)
				buf = rows
			}
			if !slices.Equal(got, want.Data) {
				t.Fatalf("%s, block %d: got %v", name, block, got)
			}
			sum, ok := r.SHA256()
			if name == "binary" && hashed && (!ok || sum != fileSHA256(t, bin)) || (name != "binary" || !hashed) && ok {
				t.Fatalf("%s: sha256 %q %v", name, sum, ok)
			}
			r.Close()
		}
	}
}

func fileSHA256(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestReaderErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.dump")
	if err := WriteFile(path, goldenLogits()); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(0, nil); err == nil || !strings.Contains(err.Error(), "reading 0 rows") {
		t.Fatalf("no rows: %v", err)
	}
	// A file cut after it was opened is named with the row it lost.
	if err := os.Truncate(path, HeaderSize+4*4); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(2, make([]float32, 1)); err == nil || !strings.Contains(err.Error(), path+": truncated dump at row 1") {
		t.Fatalf("cut short: %v", err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "truncated dump") {
		t.Fatalf("opened a truncated dump: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "none.dump")); err == nil {
		t.Fatal("opened a missing file")
	}
}
