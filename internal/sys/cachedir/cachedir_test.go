package cachedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoot(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", "/x/cache")
	if got, err := Root("tests"); err != nil || got != "/x/cache" {
		t.Errorf("with LOGITSCOPE_CACHE: %q, %v", got, err)
	}
	t.Setenv("LOGITSCOPE_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/y")
	if got, err := Root("tests"); err != nil || got != filepath.Join("/y", "logitscope") {
		t.Errorf("with XDG_CACHE_HOME: %q, %v", got, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if _, err := Root("the demo model"); err == nil || !strings.Contains(err.Error(), "no cache directory for the demo model (set LOGITSCOPE_CACHE)") {
		t.Errorf("without a cache directory: %v", err)
	}
}

// Fill makes a directory once: a second call finds its marker and fills
// nothing, and a fill that fails leaves nothing under the name.
func TestFill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "thing")
	calls := 0
	fill := func(tmp string) error {
		calls++
		return os.WriteFile(filepath.Join(tmp, "done"), []byte("x"), 0o644)
	}
	for range 2 {
		if err := Fill(dir, "done", fill); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Stat(dir); calls != 1 || err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("%d fills, %v, %v", calls, err, st)
	}
	other := filepath.Join(filepath.Dir(dir), "broken")
	if err := Fill(other, "done", func(string) error { return errors.New("no compiler") }); err == nil || err.Error() != "no compiler" {
		t.Fatalf("a failed fill: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}
