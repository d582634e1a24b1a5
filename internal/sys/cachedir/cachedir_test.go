package cachedir

import (
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
