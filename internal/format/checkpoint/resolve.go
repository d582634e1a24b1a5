package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Resolve maps a hub cache repo folder (models--org--name with snapshots/)
// to its only snapshot; any other directory is returned as is.
//
// The repo folder may be given with or without a trailing slash, and the
// snapshots folder itself is accepted too. With several snapshots Resolve
// refuses to guess: refs/main names the newest download, but a user who
// pinned an older revision would silently get different weights.
func Resolve(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", pathError(err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("checkpoint: %s: not a directory", path)
	}
	clean := filepath.Clean(path)
	if exists(filepath.Join(clean, "config.json")) {
		return path, nil
	}
	snapshots := filepath.Join(clean, "snapshots")
	repo := clean
	if filepath.Base(clean) == "snapshots" {
		snapshots, repo = clean, filepath.Dir(clean)
	} else if st, err := os.Stat(snapshots); err != nil || !st.IsDir() {
		return path, nil // a plain model directory; Open reports what is missing
	}
	entries, err := os.ReadDir(snapshots)
	if err != nil {
		return "", pathError(err)
	}
	var names []string
	for _, e := range entries {
		if st, err := os.Stat(filepath.Join(snapshots, e.Name())); err == nil && st.IsDir() {
			names = append(names, e.Name())
		}
	}
	switch len(names) {
	case 0:
		return "", fmt.Errorf("checkpoint: %s: hub cache folder has no snapshot in %s", repo, snapshots)
	case 1:
		return filepath.Join(snapshots, names[0]), nil
	}
	hint := ""
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err == nil {
		if f := strings.Fields(string(ref)); len(f) > 0 {
			hint = fmt.Sprintf(" (refs/main is %s)", f[0])
		}
	}
	return "", fmt.Errorf("checkpoint: %s: %d snapshots (%s); pass one of them, e.g. %s%s",
		repo, len(names), strings.Join(names, ", "), filepath.Join(snapshots, names[0]), hint)
}

// exists follows symlinks, so a hub snapshot entry pointing at a missing
// blob counts as absent.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// pathError words an os error as "checkpoint: PATH: problem", dropping the
// syscall name ("stat", "open") that means nothing to a user.
func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("checkpoint: %s: %w", pe.Path, pe.Err)
	}
	return fmt.Errorf("checkpoint: %w", err)
}
