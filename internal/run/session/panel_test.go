package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"negative id", "[1, 2]\n[3, -4]\n", "line 2: token id -4 is negative", 0},
		{"short window", "[1]\n", "line 1: a window needs at least 2 tokens, got 1", 0},
		{"not ids", "hello\n", "line 1: want [ids...]", 0},
		{"empty", "\n\n", "no window of at least 2 tokens", 0},
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

// FuzzReadPanelJSONL: any bytes give windows of at least 2 non-negative
// ids, or an error; never a panic.
func FuzzReadPanelJSONL(f *testing.F) {
	for _, s := range []string{"[1, 2]\n", "{\"ids\": [3, 4, 5]}\n[6,7]", "[1, -2]", "[1]", "{\"ids\": null}", "[1e3, 2]", "\n\n", "[9223372036854775807, 0]"} {
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
