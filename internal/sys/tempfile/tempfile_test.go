package tempfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// A temporary is named after its target and this process, and a failed
// write removes it and names the target.
func TestWriteFailureRemoves(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.dump")
	var seen string
	Created = func(name string) { seen = name }
	defer func() { Created = nil }()
	_, err := Write(path, func(io.Writer) error { return errors.New("disk full") })
	if err == nil || !strings.Contains(err.Error(), path+": disk full") {
		t.Fatalf("err = %v", err)
	}
	if want := ".a.dump.tmp" + strconv.Itoa(os.Getpid()) + "-"; !strings.HasPrefix(filepath.Base(seen), want) {
		t.Fatalf("temporary %s, want a name starting %s", seen, want)
	}
	if got := names(t, dir); len(got) != 0 || len(pending) != 0 {
		t.Fatalf("left behind: %v, pending %v", got, pending)
	}
}

// Files renamed together appear together or not at all: when the second
// rename fails the first target is removed again.
func TestRenameAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	write := func(path string) string {
		tmp, err := Write(path, func(w io.Writer) error { _, err := w.Write([]byte(path)); return err })
		if err != nil {
			t.Fatal(err)
		}
		return tmp
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	ta, tb := write(a), write(b)
	if err := os.Mkdir(b, 0o755); err != nil { // a file cannot be renamed over a directory
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(b, "x"), nil, 0o644)
	err := Rename(Move{ta, a}, Move{tb, b})
	if err == nil || !strings.Contains(err.Error(), b+": ") {
		t.Fatalf("err = %v", err)
	}
	if got := names(t, dir); len(got) != 1 || got[0] != "b" || len(pending) != 0 {
		t.Fatalf("after a failed pair: %v, pending %v; want only the directory b", got, pending)
	}
	os.RemoveAll(b)
	ta, tb = write(a), write(b)
	if err := Rename(Move{ta, a}, Move{tb, b}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); len(got) != 2 || len(pending) != 0 {
		t.Fatalf("after the pair: %v, pending %v", got, pending)
	}
}

// A temporary that cannot be created is an error naming the target.
func TestWriteCreateErrorNamesTarget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "a.dump")
	_, err := Write(path, func(io.Writer) error { return nil })
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
}

// A file written through a temporary is readable by others once in
// place, as one os.Create made: dumps and exports are shared.
func TestWrittenFileIsNotPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.dump")
	tmp, err := Write(path, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err })
	if err != nil {
		t.Fatal(err)
	}
	if err := Rename(Move{Temp: tmp, Path: path}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want -rw-r--r--", st.Mode().Perm())
	}
}

// A rename never replaces what is not a file of the temporary's kind: a
// dump "written" to /dev/null as root turned the device into a file.
func TestRenameRefusesDevicesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "out.dump")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{os.DevNull, fifo} {
		tmp, err := Write(filepath.Join(dir, "x"), func(w io.Writer) error { _, err := w.Write([]byte("x")); return err })
		if err != nil {
			t.Fatal(err)
		}
		err = Rename(Move{tmp, target})
		st, _ := os.Lstat(target)
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || st.Mode().IsRegular() {
			t.Errorf("%s: %v; now %v", target, err, st.Mode())
		}
	}
	// A directory's temporary does not replace a file either.
	file := filepath.Join(dir, "variant")
	os.WriteFile(file, nil, 0o644)
	tmp, err := Mkdir(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := Rename(Move{tmp, file}); err == nil {
		t.Error("a directory renamed over a file")
	}
}
