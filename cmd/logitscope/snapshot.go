package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/serve"
)

// snapshotFlags adds --snapshot and --share, which report and conform
// share: the document the page's Share stores, written to a file or
// posted to a logitscope server.
type snapshotFlags struct {
	file, server *string
}

func addSnapshotFlags(fs *flag.FlagSet, fileHelp string) snapshotFlags {
	return snapshotFlags{
		file:   fs.String("snapshot", "", fileHelp),
		server: fs.String("share", "", "post the snapshot to the logitscope server at URL (http(s)://host[:port]) and print its link; the write token, if the server has one, is read from $"+serve.TokenEnv),
	}
}

func (f snapshotFlags) wanted() bool { return *f.file != "" || *f.server != "" }

// publish writes and posts d, as the flags ask, and prints its link to
// stderr (stdout is the report's, --json's included).
func (f snapshotFlags) publish(d *snapshot.Doc, stderr io.Writer) error {
	if !f.wanted() {
		return nil
	}
	data, err := d.Marshal()
	if err != nil {
		return err
	}
	link, err := shareSnapshot(data, *f.file, *f.server)
	if link != "" {
		fmt.Fprintln(stderr, "link:", link)
	}
	return err
}

// reportSnapshot is report's comparison as the page shows it: the same
// report (same options, so the same numbers), both sides' receipts, and
// the panel breakdown.
func reportSnapshot(ref, test side, rep *margins.Report, b margins.Breakdown, text func(int) string) *snapshot.Doc {
	caps := [2]snapshot.Capture{}
	for i, s := range []side{ref, test} {
		caps[i].Side.Label = filepath.Base(s.Path)
		if s.Receipt != nil {
			caps[i].SetReceipt(s.Receipt)
		}
	}
	d := snapshot.FromReport(nil, caps[0], caps[1], rep, text)
	d.Breakdown = b
	d.Created = time.Now().UTC().Format(time.RFC3339)
	return d
}

// shareSnapshot writes b to path (if given) and posts it to server (if
// given), returning the link.
func shareSnapshot(b []byte, path, server string) (link string, err error) {
	if path != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return "", fmt.Errorf("--snapshot: %v", err)
		}
	}
	if server == "" {
		return "", nil
	}
	return serve.Share(context.Background(), server, os.Getenv(serve.TokenEnv), b)
}
