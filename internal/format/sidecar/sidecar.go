// Package sidecar reads and writes logitscope.json, the note a model
// directory may carry beside config.json for the page: what the model is
// (synthetic random weights, a trained demo, or the user's own), one line
// about it, and a ready prompt and panel text, so the page opens with
// something to run instead of empty fields.
//
//	{"nature": "trained-demo", "about": "<one line>", "prompt": "<ready prompt>", "panel": "<held-out text>"}
//
// The file is optional: a directory without one is the user's model. It
// is not part of the checkpoint's fingerprint (config.json and the weight
// shards), so writing it never changes what a receipt or a variant's
// manifest pins.
package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// File is the sidecar's name in a model directory.
const File = "logitscope.json"

// Natures of a model.
const (
	Synthetic   = "synthetic"    // random weights from package synth: its text is noise
	TrainedDemo = "trained-demo" // a small model trained for the demo
	User        = "user"         // anything else: the user's model
)

// Natures lists the values Note.Nature takes.
var Natures = []string{Synthetic, TrainedDemo, User}

// MaxBytes bounds a sidecar: it is read whole when a model is listed.
const MaxBytes = 1 << 20

// Note is the sidecar's content.
type Note struct {
	Nature string `json:"nature"`
	About  string `json:"about,omitempty"`  // one line for people
	Prompt string `json:"prompt,omitempty"` // a ready user turn for greedy runs
	Panel  string `json:"panel,omitempty"`  // held-out text for a teacher-forced panel
}

// Check names the first field that is not what the page can show.
func (n Note) Check() error {
	switch {
	case !contains(Natures, n.Nature):
		return fmt.Errorf("nature %q: want one of %s", n.Nature, strings.Join(Natures, ", "))
	case strings.ContainsFunc(n.About, unicode.IsControl):
		return fmt.Errorf("about %q: one line, without control characters", n.About)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Read returns dir's sidecar. A directory without one is the user's
// model: Note{Nature: User} and no error. A sidecar that does not parse or
// check is an error naming the file, rather than a model described wrongly.
func Read(dir string) (Note, error) {
	path := filepath.Join(dir, File)
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return Note{Nature: User}, nil
	}
	if err == nil && !st.Mode().IsRegular() {
		// Opening a FIFO would wait for a writer forever.
		return Note{}, fmt.Errorf("%s: not a regular file", path)
	}
	if err != nil {
		return Note{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Note{}, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxBytes+1)); err != nil {
		return Note{}, fmt.Errorf("%s: %w", path, err)
	}
	if buf.Len() > MaxBytes {
		return Note{}, fmt.Errorf("%s: over %d bytes", path, MaxBytes)
	}
	return Parse(buf.Bytes(), path)
}

// Parse decodes a sidecar's bytes; name says which file in errors. Fields
// it does not know are ignored, so that a newer sidecar still lists.
func Parse(data []byte, name string) (Note, error) {
	var n Note
	if err := json.Unmarshal(data, &n); err != nil {
		return Note{}, fmt.Errorf("%s: %v", name, err)
	}
	if err := n.Check(); err != nil {
		return Note{}, fmt.Errorf("%s: %v", name, err)
	}
	return n, nil
}

// Write stores n as dir's sidecar, indented and newline-terminated (the
// same note gives the same bytes), through a temporary file renamed into
// place, so a reader never sees half of it.
func Write(dir string, n Note) error {
	if err := n.Check(); err != nil {
		return fmt.Errorf("%s: %v", filepath.Join(dir, File), err)
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+File+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, File))
}
