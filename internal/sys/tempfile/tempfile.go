// Package tempfile is how logitscope writes files and directories whole or
// not at all: each is written under a temporary name beside its target and
// renamed into place when complete. The temporaries a process has in
// flight are registered, so that a process exiting on a signal removes
// them (Abandon), and their names carry the writer's pid, so that a later
// writer of the same target removes the ones a killed process left.
package tempfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

var (
	// mu orders creating, committing and abandoning temporaries: a
	// signal's cleanup never runs halfway through a commit, and nothing
	// is created or committed after it.
	mu      sync.Mutex
	pending = map[string]bool{}
)

// Created, when not nil, is called with each temporary's name once it is
// registered, before anything is written to it. Tests set it to hold a
// writer mid-write.
var Created func(name string)

// prefix is what the temporaries of path are named after.
func prefix(path string) string { return "." + filepath.Base(path) + ".tmp" }

// Create creates a temporary file beside path, named
// ".BASE.tmpPID-RANDOM", after removing the stale temporaries of path.
func Create(path string) (*os.File, error) {
	removeStale(path)
	mu.Lock()
	f, err := os.CreateTemp(filepath.Dir(path), prefix(path)+strconv.Itoa(os.Getpid())+"-*")
	if err == nil {
		pending[f.Name()] = true
	}
	mu.Unlock()
	if err != nil {
		return nil, err
	}
	// CreateTemp makes it private (0600), and the rename keeps that: a
	// dump or an export is read by others, as a file os.Create made.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		Remove(f.Name())
		return nil, err
	}
	if Created != nil {
		Created(f.Name())
	}
	return f, nil
}

// Mkdir creates a temporary directory beside path, named as Create names
// files, after removing the stale temporaries of path.
func Mkdir(path string) (string, error) {
	removeStale(path)
	mu.Lock()
	name, err := os.MkdirTemp(filepath.Dir(path), prefix(path)+strconv.Itoa(os.Getpid())+"-*")
	if err == nil {
		pending[name] = true
	}
	mu.Unlock()
	if err != nil {
		return "", err
	}
	if Created != nil {
		Created(name)
	}
	return name, nil
}

// Write creates a temporary beside path, writes it with write and closes
// it. It returns the temporary's name for Rename or Commit; on an error
// the temporary is removed.
func Write(path string, write func(io.Writer) error) (string, error) {
	f, err := Create(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		Remove(f.Name())
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return f.Name(), nil
}

// Remove removes a temporary that will not be committed.
func Remove(name string) {
	mu.Lock()
	defer mu.Unlock()
	delete(pending, name)
	os.RemoveAll(name)
}

// Commit runs move, which puts finished temporaries in place, as one step
// that a signal's cleanup waits for; then it removes whatever of temps
// move left (all of them when move failed).
func Commit(move func() error, temps ...string) error {
	mu.Lock()
	defer mu.Unlock()
	err := move()
	for _, t := range temps {
		delete(pending, t)
		os.RemoveAll(t) // a no-op for a temporary that move renamed
	}
	return err
}

// A Move is a finished temporary and the path it goes to.
type Move struct{ Temp, Path string }

// Rename renames each temporary onto its path, in order, as one Commit.
// When one fails, the paths already renamed onto are removed, so that the
// files appear all together or not at all.
func Rename(moves ...Move) error {
	temps := make([]string, len(moves))
	for i, m := range moves {
		temps[i] = m.Temp
	}
	return Commit(func() error {
		for _, m := range moves {
			if err := replaceable(m); err != nil {
				return err
			}
		}
		for i, m := range moves {
			if err := os.Rename(m.Temp, m.Path); err != nil {
				for _, done := range moves[:i] {
					os.Remove(done.Path)
				}
				return fmt.Errorf("%s: %w", m.Path, err)
			}
		}
		return nil
	}, temps...)
}

// replaceable refuses a move onto what is not a file of the temporary's
// kind: a rename replaces anything, and as root a dump "written" to
// /dev/null turned the device into a regular file. A symlink is replaced
// itself, not what it points at.
func replaceable(m Move) error {
	at, err := os.Lstat(m.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	tmp, err := os.Lstat(m.Temp)
	if err != nil {
		return err
	}
	switch {
	case at.Mode()&os.ModeSymlink != 0, tmp.IsDir() && at.IsDir(), tmp.Mode().IsRegular() && at.Mode().IsRegular():
		return nil
	case at.IsDir():
		return fmt.Errorf("%s: a directory, which a file is not written over", m.Path)
	case tmp.IsDir() && at.Mode().IsRegular():
		return fmt.Errorf("%s: a file, where a directory was to go", m.Path)
	}
	return fmt.Errorf("%s: not a regular file (%v), which is not written over", m.Path, at.Mode().Type())
}

// Abandon removes every temporary in flight and returns their names, for
// a process about to exit on a signal. It never returns the lock, so that
// no writer creates or commits anything before the process exits.
func Abandon() []string {
	mu.Lock()
	var removed []string
	for name := range pending {
		if os.RemoveAll(name) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}

// removeStale removes the temporaries of path that writers no longer
// running left: ".BASE.tmpPID-RANDOM" where no process PID exists. A name
// that does not parse so (another file's, or an older version's
// ".BASE.tmpRANDOM" whose writer cannot be told) is left alone, and so is
// one whose PID is alive, even when that pid was reused: keeping a stale
// temporary is harmless, removing a live one is not. Failing to list or
// remove is ignored: a stale temporary does not stop the new write.
func removeStale(path string) {
	dir, pre := filepath.Dir(path), prefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), pre)
		if !ok {
			continue
		}
		pid, random, ok := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 || !digits(random) || n == os.Getpid() || alive(n) {
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
