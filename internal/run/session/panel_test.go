package session

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/chain"
)

// readJSONL writes data as a .jsonl panel and reads it.
func readJSONL(t *testing.T, data []byte) ([][]int, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "panel.jsonl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadPanel(path, nil, 0, nil)
}

func TestReadPanelJSONL(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string // in the error; "": windows
		n    int
	}{
		{"arrays and objects", "[1, 2]\n\n{\"ids\": [3, 4, 5]}\n", "", 2},
		{"the seed's objects", `{"input_ids": [0, 0, 5, 6, 7], "attention_mask": [0, 0, 1, 1, 1], "window_id": 3, "document_id": "d1", "domain": "code", "role": "eval"}` + "\n" +
			`{"input_ids": [5, 6, 7, 0], "attention_mask": [1, 1, 1, 0], "window_id": "w2"}`, "", 2},
		{"negative id", "[1, 2]\n[3, -4]\n", "line 2: token id -4 is negative", 0},
		{"short window", "[1]\n", "line 1: a window needs at least 2 tokens, got 1", 0},
		{"not ids", "hello\n", "line 1: want [ids...]", 0},
		{"empty", "\n\n", "no window of at least 2 tokens", 0},
		{"ids and input_ids", `{"ids": [1, 2], "input_ids": [1, 2]}`, `line 1: both "ids" and "input_ids"`, 0},
		{"mask length", `{"input_ids": [1, 2, 3], "attention_mask": [1, 1], "window_id": 9}`, "line 1: window 9: attention_mask has 2 values for 3 tokens", 0},
		{"mask value", `{"input_ids": [1, 2, 3], "attention_mask": [1, 2, 1]}`, "line 1: attention_mask[1] is 2: want 0 or 1", 0},
		{"mask with a gap", `{"input_ids": [1, 2, 3, 4, 5], "attention_mask": [1, 1, 0, 1, 1], "window_id": "a"}`,
			"line 1: window a: attention_mask has a gap at [2, 3) inside its attended tokens [0, 5)", 0},
		{"one attended token", `{"input_ids": [1, 2, 3], "attention_mask": [0, 1, 0]}`, "line 1: attention_mask attends 1 tokens", 0},
		{"nothing attended", `{"input_ids": [1, 2, 3], "attention_mask": [0, 0, 0]}`, "line 1: attention_mask attends 0 tokens", 0},
		{"window id twice", `{"ids": [1, 2], "window_id": 1}` + "\n" + `{"ids": [1, 2], "window_id": "1"}`, `line 2: window_id "1" is line 1's too`, 0},
		{"empty window id", `{"ids": [1, 2], "window_id": ""}`, "line 1: window_id is empty", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := readJSONL(t, []byte(tc.data))
			if tc.want == "" {
				if err != nil || len(w) != tc.n {
					t.Fatalf("%v, %v; want %d windows", w, err, tc.n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, error %v; want one containing %q", w, err, tc.want)
			}
		})
	}
}

// A masked window runs its attended span, and its rows are the seed's
// prediction positions: i where mask[i] and mask[i+1] are both 1.
func TestPanelMasks(t *testing.T) {
	tests := []struct {
		name      string
		ids, mask []int
		span      [2]int
	}{
		{"no mask", []int{7, 8, 9}, nil, [2]int{0, 3}},
		{"all ones", []int{7, 8, 9}, []int{1, 1, 1}, [2]int{0, 3}},
		{"left padding", []int{0, 0, 7, 8, 9}, []int{0, 0, 1, 1, 1}, [2]int{2, 5}},
		{"right padding", []int{7, 8, 9, 0}, []int{1, 1, 1, 0}, [2]int{0, 3}},
		{"both", []int{0, 7, 8, 0, 0}, []int{0, 1, 1, 0, 0}, [2]int{1, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			span, err := attended(tc.ids, tc.mask)
			if err != nil || span != tc.span {
				t.Fatalf("span %v, %v; want %v", span, err, tc.span)
			}
			mask := tc.mask
			if mask == nil {
				mask = []int{1, 1, 1}
			}
			seed := 0 // the seed's rule, counted directly
			for i := 0; i+1 < len(mask); i++ {
				seed += mask[i] & mask[i+1]
			}
			w := PanelWindow{IDs: tc.ids, Mask: tc.mask, Span: span}
			if e := w.Entry(); e.PredictionPositions != seed || len(w.Tokens())-1 != seed {
				t.Fatalf("%d prediction positions, %d rows run; the seed's rule gives %d", e.PredictionPositions, len(w.Tokens())-1, seed)
			}
		})
	}
}

// writePanel writes a .jsonl panel of two windows and returns its path.
func writePanel(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "panel.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var sealedPanel = []string{
	`{"input_ids": [0, 5, 6, 7], "attention_mask": [0, 1, 1, 1], "window_id": 0, "document_id": "doc-a", "domain": "code", "role": "eval"}`,
	`{"input_ids": [8, 9, 10], "attention_mask": [1, 1, 1], "window_id": 1, "document_id": "doc-b", "domain": "prose", "role": "calibration"}`,
}

// A panel whose receipt lies beside it must still be the panel it
// sealed: any change to a window's tokens, mask, id, document, domain or
// role is refused naming the window and the field.
func TestPanelReceiptTamper(t *testing.T) {
	path := writePanel(t, sealedPanel...)
	p, err := ReadPanelFile(path, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.WritePanel(chain.PanelPath(path), p.Receipt); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPanelFile(path, nil, 0, nil); err != nil {
		t.Fatalf("the sealed panel itself: %v", err)
	}
	tests := []struct{ name, old, new, want string }{
		{"a token", `[0, 5, 6, 7]`, `[0, 5, 6, 8]`, "panel: window 0: token_ids_sha256"},
		{"a padded token", `[0, 5, 6, 7]`, `[1, 5, 6, 7]`, "panel: window 0: token_ids_sha256"},
		{"the mask", `[0, 1, 1, 1]`, `[1, 1, 1, 1]`, "panel: window 0: attention_mask_sha256"},
		{"the document", `"doc-b"`, `"doc-c"`, "panel: window 1: document_id"},
		{"the domain", `"prose"`, `"poetry"`, "panel: window 1: domain"},
		{"the role", `"calibration"`, `"eval"`, "panel: window 1: role"},
		{"the window id", `"window_id": 1,`, `"window_id": 2,`, `panel: window 2 of the receipt is "1", the panel file's is "2"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := slices.Clone(sealedPanel)
			for i := range lines {
				lines[i] = strings.Replace(lines[i], tc.old, tc.new, 1)
			}
			if slices.Equal(lines, sealedPanel) {
				t.Fatalf("%q is not in the panel", tc.old)
			}
			tampered := writePanel(t, lines...)
			b, _ := os.ReadFile(chain.PanelPath(path))
			os.WriteFile(chain.PanelPath(tampered), b, 0o644)
			_, err := ReadPanelFile(tampered, nil, 0, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tampered) {
				t.Fatalf("error %v; want one naming %s and containing %q", err, tampered, tc.want)
			}
		})
	}
	t.Run("the receipt", func(t *testing.T) {
		b, _ := os.ReadFile(chain.PanelPath(path))
		os.WriteFile(chain.PanelPath(path), []byte(strings.Replace(string(b), `"code"`, `"math"`, 1)), 0o644)
		_, err := ReadPanelFile(path, nil, 0, nil)
		if err == nil || !strings.Contains(err.Error(), "panel.jsonl.receipt.json: seal is") {
			t.Fatalf("error %v; want the receipt's seal refused", err)
		}
	})
}

// FuzzReadPanelJSONL: any bytes give windows of at least 2 non-negative
// ids, or an error; never a panic.
func FuzzReadPanelJSONL(f *testing.F) {
	for _, s := range []string{"[1, 2]\n", "{\"ids\": [3, 4, 5]}\n[6,7]", "[1, -2]", "[1]", "{\"ids\": null}", "[1e3, 2]", "\n\n", "[9223372036854775807, 0]",
		`{"input_ids": [0, 5, 6], "attention_mask": [0, 1, 1], "window_id": 3, "domain": "code", "role": "eval"}`,
		`{"input_ids": [5, 6, 0], "attention_mask": [1, 0, 1]}`, `{"input_ids": [5, 6], "attention_mask": [1, 1], "window_id": 1.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		windows, err := readJSONL(t, data)
		if err != nil {
			return
		}
		if len(windows) == 0 {
			t.Fatal("no windows and no error")
		}
		for _, w := range windows {
			if len(w) < 2 {
				t.Fatalf("window %v: fewer than 2 ids", w)
			}
			for _, id := range w {
				if id < 0 {
					t.Fatalf("window %v: negative id", w)
				}
			}
		}
	})
}

// testdata/seed-panel.jsonl is a panel in the seed's layout (padded left
// and right, documents, domains, roles) with the receipt `logitscope
// panel` sealed beside it: it reads against that receipt, which is
// byte for byte what sealing it writes today (a golden file of the
// receipt's format), and its windows run their attended spans.
func TestSeedPanelGolden(t *testing.T) {
	const path = "testdata/seed-panel.jsonl"
	p, err := ReadPanelFile(path, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "receipt.json")
	if err := chain.WritePanel(again, p.Receipt); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(again)
	want, err := os.ReadFile(chain.PanelPath(path))
	if err != nil || string(got) != string(want) {
		t.Fatalf("%s is not what sealing the panel writes now (go run ./cmd/logitscope panel --force %s):\n%s", chain.PanelPath(path), path, got)
	}
	positions := 0
	for _, w := range p.Windows {
		positions += len(w.Tokens()) - 1
		for i, id := range w.IDs {
			if attended := i >= w.Span[0] && i < w.Span[1]; attended != (w.Mask[i] == 1) {
				t.Fatalf("window %s: token %d (%d) attended %v, mask %d", w.ID, i, id, attended, w.Mask[i])
			}
		}
	}
	if len(p.Windows) != 8 || positions != 227 {
		t.Fatalf("%d windows, %d prediction positions", len(p.Windows), positions)
	}
}
