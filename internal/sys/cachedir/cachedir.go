// Package cachedir names the one directory where logitscope keeps what it
// generates or derives once and reuses: synthetic and demo checkpoints,
// the files derived from a GGUF's metadata, compiled wasm, the llama.cpp
// harness, shared runs.
package cachedir

import (
	"fmt"
	"os"
	"path/filepath"
)

// Root is $LOGITSCOPE_CACHE, else logitscope/ in the user's cache
// directory. what says what wanted it, for the error when there is none.
func Root(what string) (string, error) {
	if root := os.Getenv("LOGITSCOPE_CACHE"); root != "" {
		return root, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for %s (set LOGITSCOPE_CACHE): %w", what, err)
	}
	return filepath.Join(c, "logitscope"), nil
}
