package margins

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/dump"
)

// Captures read from files a block at a time give the report of the same
// captures in memory, bit for bit, for every number of workers: here 40
// rows of Qwen's vocabulary, a few blocks of each side.
func TestCompareReadersSameReport(t *testing.T) {
	const rows, vocab = 40, 151936
	ref, test := randomPair(3, rows, vocab, 0.05)
	targets := make([]int, rows)
	for i := range targets {
		targets[i] = (i * 7919) % vocab
	}
	want, err := json.Marshal(mustCompare(t, ref, test, targets, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths := map[string]string{}
	for name, l := range map[string]*dump.Logits{"ref.dump": ref, "test.safetensors": test} {
		paths[name] = filepath.Join(dir, name)
		if err := dump.WriteFile(paths[name], l); err != nil {
			t.Fatal(err)
		}
	}
	if blocks := rows / (blockBytes / (4 * vocab)); blocks < 3 {
		t.Fatalf("%d blocks: the test no longer crosses blocks", blocks)
	}
	for _, workers := range []int{1, 3} {
		r, err := dump.Open(paths["ref.dump"])
		if err != nil {
			t.Fatal(err)
		}
		s, err := dump.Open(paths["test.safetensors"])
		if err != nil {
			t.Fatal(err)
		}
		rep, err := CompareReaders(r, s, targets, Options{Workers: workers})
		r.Close()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%d workers: the streamed report differs from the one in memory", workers)
		}
	}
}

// A bad logit past the first block is named by its row, and a capture cut
// short after it was opened stops the comparison with the file's name.
func TestCompareReadersErrors(t *testing.T) {
	const rows, vocab = 40, 151936
	ref, test := randomPair(4, rows, vocab, 0.05)
	test.Row(37)[5] = float32(math.NaN())
	dir := t.TempDir()
	refPath, testPath := filepath.Join(dir, "ref.dump"), filepath.Join(dir, "test.dump")
	for path, l := range map[string]*dump.Logits{refPath: ref, testPath: test} {
		if err := dump.WriteFile(path, l); err != nil {
			t.Fatal(err)
		}
	}
	open := func(path string) *dump.Reader {
		r, err := dump.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	_, err := CompareReaders(open(refPath), open(testPath), nil, Options{})
	if err == nil || err.Error() != "margins: test row 37: token 5 has logit NaN" {
		t.Fatalf("NaN in row 37: %v", err)
	}
	r := open(refPath)
	if err := os.Truncate(refPath, dump.HeaderSize+4*20*vocab); err != nil {
		t.Fatal(err)
	}
	_, err = CompareReaders(r, open(testPath), nil, Options{})
	if err == nil || !strings.Contains(err.Error(), refPath+": truncated dump at row 20") {
		t.Fatalf("cut at row 20: %v", err)
	}
}
