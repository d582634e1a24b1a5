// Package cachedir names the one directory where logitscope keeps what it
// generates or derives once and reuses: synthetic and demo checkpoints,
// the files derived from a GGUF's metadata, compiled wasm, the llama.cpp
// harness, shared runs.
package cachedir

import (
	"fmt"
	"os"
	"path/filepath"

	"logitscope/internal/sys/tempfile"
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

// Fill makes dir (in the cache) with fill, unless it already holds
// marker: fill writes a fresh temporary directory beside dir, which is
// renamed into place. Concurrent processes (go test runs packages in
// parallel) each fill their own and the first rename wins; an interrupted
// fill leaves nothing half-made under dir's name.
func Fill(dir, marker string, fill func(tmp string) error) error {
	done := func() bool {
		_, err := os.Stat(filepath.Join(dir, marker))
		return err == nil
	}
	if done() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := tempfile.Mkdir(dir)
	if err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		tempfile.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // Mkdir made it private
		tempfile.Remove(tmp)
		return err
	}
	if err := tempfile.Rename(tempfile.Move{Temp: tmp, Path: dir}); err != nil && !done() {
		return err // a loser of the race finds the winner's instead
	}
	return nil
}
