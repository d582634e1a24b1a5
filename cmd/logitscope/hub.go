package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"logitscope/hub"
	"logitscope/hub/download"
)

// hubModel downloads the model a hub id names into the hub cache (unless
// it is there) and returns the path it opens from. Progress goes to
// stderr through hubProgress.
func hubModel(s string, stderr io.Writer) (string, error) {
	id, err := hub.Parse(s)
	if err != nil {
		return "", err
	}
	c, err := download.FromEnv()
	if err != nil {
		return "", err
	}
	tty := isTerminal(stderr)
	c.Progress = hubProgress(stderr, tty)
	c.Every = 5 * time.Second // a line now and then in a log
	if tty {
		c.Every = 200 * time.Millisecond
	}
	path, err := c.Open(context.Background(), id)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "model: %s from %s: %s\n", id, c.Endpoint, path)
	return path, nil
}

// hubProgress prints a download's progress: on a terminal one line per
// file, rewritten in place; elsewhere (a log, a test) plain lines. The
// files already in the cache say nothing.
func hubProgress(w io.Writer, tty bool) func(download.Progress) {
	erase := "" // the rest of a line rewritten in place
	if tty {
		erase = "\x1b[K"
	}
	return func(p download.Progress) {
		what := fmt.Sprintf("hf:%s/%s", p.ID.Repo, p.File)
		switch p.State {
		case download.StateNote:
			fmt.Fprintf(w, "%s: %s\n", p.ID, p.Note)
		case download.StateStart:
			if p.Done > 0 {
				fmt.Fprintf(w, "%s: resuming at %s of %s\n", what, mb(p.Done), mb(p.Total))
			} else if !tty {
				fmt.Fprintf(w, "%s: downloading %s\n", what, mb(p.Total))
			}
		case download.StateBytes:
			end := "\n"
			if tty {
				end = erase + "\r"
			}
			fmt.Fprintf(w, "%s: %s of %s (%.0f%%)%s", what, mb(p.Done), mb(p.Total), 100*float64(p.Done)/float64(max(p.Total, 1)), end)
		case download.StateDone:
			fmt.Fprintf(w, "%s: %s, checked%s\n", what, mb(p.Total), erase)
		}
	}
}

func mb(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// isTerminal says whether w is a character device (a terminal), where a
// line can be rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
