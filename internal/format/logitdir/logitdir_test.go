package logitdir

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/chain/chaintest"
	"logitscope/internal/format/dump"
)

// window i of the test capture: i+1 rows of 4 logits.
func window(i int) *dump.Logits {
	l := &dump.Logits{Rows: i + 1, Vocab: 4, Data: make([]float32, 4*(i+1))}
	for j := range l.Data {
		l.Data[j] = float32(100*i + j)
	}
	return l
}

// writeShard writes the windows of indices into a new directory.
func writeShard(t *testing.T, shard string, indices ...int) string {
	t.Helper()
	dir := t.TempDir()
	r := &Receipt{Vocab: 4, Shard: shard}
	for _, i := range indices {
		f, err := WriteWindow(dir, i, window(i), chain.PanelWindow{WindowID: strconv.Itoa(i), TokenIDsSHA256: TokensSHA256([]int{i, i + 1})}, map[string]string{"model_sha256": "m"})
		if err != nil {
			t.Fatal(err)
		}
		f.Domain = []string{"code", "prose"}[i%2]
		r.LogitFiles = append(r.LogitFiles, f)
	}
	if err := WriteReceipt(dir, r); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Two shards (windows dealt round-robin) read as one capture: the windows
// in id order, their rows one after another.
func TestShardsReadAsOne(t *testing.T) {
	a, b := writeShard(t, "0/2", 0, 2, 10), writeShard(t, "1/2", 1, 3)
	c, err := Open(b, a)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var want []float32
	for _, w := range c.Windows {
		ids = append(ids, string(w.WindowID))
	}
	for _, i := range []int{0, 1, 2, 3, 10} {
		want = append(want, window(i).Data...)
	}
	if !slices.Equal(ids, []string{"0", "1", "2", "3", "10"}) {
		t.Fatalf("window order %v", ids)
	}
	r, targets, err := Rows("capture", c.Windows)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []float32
	for {
		rows, err := r.Next(3, nil)
		if err != nil {
			break
		}
		got = append(got, rows...)
	}
	if r.Rows != 1+2+3+4+11 || !slices.Equal(got, want) {
		t.Fatalf("%d rows %v, want %v", r.Rows, got, want)
	}
	if targets != nil {
		t.Fatalf("windows without targets metadata gave targets %v", targets)
	}
	if c.Windows[1].Domain != "prose" {
		t.Fatalf("domain %q", c.Windows[1].Domain)
	}
}

// A changed byte in a window file, or in the receipt, is refused naming
// the file; so are a window in two shards and a path out of the capture.
func TestRefused(t *testing.T) {
	cases := []struct {
		name string
		dirs func(t *testing.T) []string
		want string
	}{
		{"a changed window", func(t *testing.T) []string {
			d := writeShard(t, "", 0, 1)
			p := filepath.Join(d, WindowPath(1))
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			os.WriteFile(p, b, 0o644)
			return []string{d}
		}, "window-0001.safetensors: 240 bytes, sha256"},
		{"a changed receipt", func(t *testing.T) []string {
			d := writeShard(t, "", 0)
			p := filepath.Join(d, ReceiptName)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"prediction_positions": 1`, `"prediction_positions": 2`, 1)), 0o644)
			return []string{d}
		}, ReceiptName},
		{"a window twice", func(t *testing.T) []string { return []string{writeShard(t, "", 0, 1), writeShard(t, "", 1)} }, "window 1 is in"},
		{"a path outside", func(t *testing.T) []string {
			d := t.TempDir()
			if err := WriteReceipt(d, &Receipt{LogitFiles: []File{{WindowID: "0", Path: "../x.safetensors"}}}); err != nil {
				t.Fatal(err)
			}
			return []string{d}
		}, `path "../x.safetensors" is not a path inside the capture`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(c.dirs(t)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

// chained writes a capture of windows 0 and 1 (domains code and prose)
// under a receipt with a sealed chain and panel receipt.
func chained(t *testing.T) string { return chainedShard(t, []int{0, 1}, nil) }

// chainedShard writes the windows of shard (of a panel of 4: 0, 1 code
// and prose, 2, 3 math and poetry) under a chain of the whole panel;
// change, when set, changes the chain before its checkpoint is sealed.
func chainedShard(t *testing.T, shard []int, change func(*chain.Chain)) string {
	t.Helper()
	dir := t.TempDir()
	p := &chain.Panel{}
	r := &Receipt{Vocab: 4}
	for i := range 4 {
		w := chain.PanelWindow{WindowID: strconv.Itoa(i), Domain: []string{"code", "prose", "math", "poetry"}[i], Role: "eval", Tokens: i + 2,
			TokenIDsSHA256: TokensSHA256([]int{i, i + 1}), AttentionMaskSHA256: TokensSHA256([]int{1, 1}), PredictionPositions: i + 1}
		p.Windows = append(p.Windows, w)
		if !slices.Contains(shard, i) {
			continue
		}
		f, err := WriteWindow(dir, i, window(i), w, nil)
		must(t, err)
		r.LogitFiles = append(r.LogitFiles, f)
	}
	r.Chain = chaintest.Chain(t, p)
	if change != nil {
		change(r.Chain)
		must(t, chain.Seal(r.Chain.Contract))
		r.Chain.Checkpoint.Contract = r.Chain.Contract.Seal
		must(t, chain.Seal(r.Chain.Checkpoint))
		r.Chain.Backend.Checkpoint = r.Chain.Checkpoint.Seal
		must(t, chain.Seal(r.Chain.Backend))
	}
	r.Model = r.Chain.Checkpoint.Model
	must(t, WriteReceipt(dir, r))
	return dir
}

// Shards of one capture share its chain's checkpoint identity and panel:
// a shard of another variant, or of a capture without a chain, is refused
// naming both directories.
func TestShardsOfOneChain(t *testing.T) {
	a := chainedShard(t, []int{0, 2}, nil)
	if c, err := Open(a, chainedShard(t, []int{1, 3}, nil)); err != nil || len(c.Windows) != 4 {
		t.Fatalf("two shards of one capture: %v", err)
	}
	q4 := chainedShard(t, []int{1, 3}, func(c *chain.Chain) { c.Contract.Variant, c.Contract.Scheme = "q4", "q4" })
	if _, err := Open(a, q4); err == nil || !strings.Contains(err.Error(), q4+": checkpoint identity ") || !strings.Contains(err.Error(), "the shards are of different captures") {
		t.Fatalf("a shard of another variant: %v", err)
	}
	if _, err := Open(a, writeShard(t, "", 1, 3)); err == nil || !strings.Contains(err.Error(), "one receipt has a chain and the other none") {
		t.Fatalf("a shard without a chain: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A capture receipt's chain is checked link by link before the receipt's
// own seal, so an edit is refused naming the link or the window it
// touched, not just the file.
func TestChainRefused(t *testing.T) {
	if _, err := Open(chained(t)); err != nil {
		t.Fatalf("the chained capture: %v", err)
	}
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"a shard of the inventory", strings.Repeat("1", 64), strings.Repeat("2", 64), "capture-receipt.json: inventory: seal "},
		{"the contract", `"scheme": "f32"`, `"scheme": "q4"`, "capture-receipt.json: contract: seal "},
		{"the backend", `"device": "cpu"`, `"device": "gpu"`, "capture-receipt.json: backend: seal "},
		{"the panel receipt", `"domain": "prose",
          "role"`, `"domain": "poetry",
          "role"`, "capture-receipt.json: panel: seal "},
		{"a window's domain", `"domain": "prose",
      "role"`, `"domain": "poetry",
      "role"`, `capture-receipt.json: window 1: domain "poetry", the panel receipt says "prose"`},
		{"a window's tokens", `"token_ids_sha256": "` + TokensSHA256([]int{0, 1}) + `",
      "prediction_positions"`, `"token_ids_sha256": "` + TokensSHA256([]int{0, 2}) + `",
      "prediction_positions"`, "capture-receipt.json: window 0: token_ids_sha256"},
		{"the receipt's vocab", `"vocab": 4`, `"vocab": 5`, "capture-receipt.json: seal is"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := chained(t)
			p := filepath.Join(d, ReceiptName)
			b, _ := os.ReadFile(p)
			if !strings.Contains(string(b), tc.old) {
				t.Fatalf("%q is not in the receipt:\n%s", tc.old, b)
			}
			os.WriteFile(p, []byte(strings.Replace(string(b), tc.old, tc.new, 1)), 0o644)
			_, err := Open(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
