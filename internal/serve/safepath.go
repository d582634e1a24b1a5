package serve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// errNotFound is what every rejected path becomes: the client learns only
// "404", the log learns why.
var errNotFound = errors.New("not found")

// cleanRel checks a slash-separated path taken from a decoded URL. It is
// deliberately strict: any segment that could mean something to the file
// system other than "this name in this directory" is refused rather than
// normalised, so that no cleaning step can turn a rejected path into an
// accepted one.
func cleanRel(rel string) (string, error) {
	switch {
	case rel == "":
		return "", errors.New("empty path")
	case strings.ContainsRune(rel, 0):
		return "", errors.New("NUL in path")
	case strings.ContainsRune(rel, '\\'):
		return "", errors.New("backslash in path")
	case strings.HasPrefix(rel, "/"):
		return "", errors.New("absolute path")
	case strings.ContainsRune(rel, ':'):
		return "", errors.New("colon in path") // a Windows volume or stream name
	}
	for _, seg := range strings.Split(rel, "/") {
		switch {
		case seg == "":
			return "", errors.New("empty path segment")
		case seg == "." || seg == "..":
			return "", errors.New("dot segment")
		case strings.HasPrefix(seg, "."):
			return "", errors.New("hidden file")
		}
	}
	return filepath.FromSlash(rel), nil
}

// openUnder opens root/rel as a regular file, after resolving every symlink
// and checking that the result still lies inside root. realRoot must be
// root with its own symlinks already resolved.
func openUnder(realRoot, rel string) (*os.File, os.FileInfo, error) {
	clean, err := cleanRel(rel)
	if err != nil {
		return nil, nil, err
	}
	resolved, err := filepath.EvalSymlinks(filepath.Join(realRoot, clean))
	if err != nil {
		return nil, nil, err
	}
	if !within(realRoot, resolved) {
		return nil, nil, errors.New("resolves outside the directory: " + resolved)
	}
	// Checked before opening too: opening a FIFO waits for a writer,
	// which hung serve at startup.
	if st, err := os.Stat(resolved); err != nil {
		return nil, nil, err
	} else if !st.Mode().IsRegular() {
		return nil, nil, errors.New("not a regular file")
	}
	f, err := os.Open(resolved)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, errors.New("not a regular file")
	}
	return f, st, nil
}

func within(root, path string) bool {
	return strings.HasPrefix(path, root+string(filepath.Separator))
}
