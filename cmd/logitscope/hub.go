package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"logitscope/internal/model/hub"
	"logitscope/internal/model/hub/download"
	"logitscope/internal/sys/progress"
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
	c.Progress = hubProgress(stderr, progress.New(stderr))
	c.Every = 200 * time.Millisecond // the meter decides what to show
	path, err := c.Open(context.Background(), id)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "model: %s from %s: %s\n", id, c.Endpoint, path)
	return path, nil
}

// hubProgress shows a download on m, one step per file (a bar on a
// terminal, plain lines in a log); notes and resumptions go to w as lines.
// The files already in the cache say nothing.
func hubProgress(w io.Writer, m progress.Meter) func(download.Progress) {
	var last int64 // bytes of the current file shown so far
	return func(p download.Progress) {
		what := fmt.Sprintf("hf:%s/%s", p.ID.Repo, p.File)
		switch p.State {
		case download.StateNote:
			fmt.Fprintf(w, "%s: %s\n", p.ID, p.Note)
		case download.StateStart:
			if p.Done > 0 {
				fmt.Fprintf(w, "%s: resuming at %s of %s\n", what, progress.Amount(p.Done, progress.Bytes), progress.Amount(p.Total, progress.Bytes))
			}
			m.Start(p.Total, what, progress.Bytes)
			m.Add(p.Done)
			last = p.Done
		case download.StateBytes:
			m.Add(p.Done - last)
			last = p.Done
		case download.StateDone:
			m.Add(p.Total - last)
			m.Done()
		}
	}
}
