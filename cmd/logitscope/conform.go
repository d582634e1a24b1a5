package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/internal/run/capture"
	"logitscope/internal/run/conform"
	"logitscope/internal/serve"
	"logitscope/internal/sys/progress"
)

// conformCommand runs a conformance suite (package conform) against its
// thresholds, with a table on stdout and, if asked, JUnit XML.
func conformCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "merge" {
		return conformMerge(args[1:], stdout)
	}
	fs := newFlags("conform", stdout)
	suitePath := fs.String("suite", "", "suite file (JSON; see conform/tiny.json) (required)")
	junitPath := fs.String("junit", "", "also write JUnit XML to FILE")
	outDir := fs.String("out", "", "directory for each case's dumps, receipts and reports (default: a new temporary directory)")
	shardFlag := fs.String("shard", "", "run only shard i of n (i/n, 1-based): the cases whose index mod n is i-1")
	enginePath := fs.String("engine", "", "engine.wasm for --runtime wasm (default $LOGITSCOPE_ENGINE, else "+capture.DefaultEngine+")")
	rt := fs.String("runtime", "wasm", "wasm (engine.wasm under wazero, on the GPU) or native (the Go engine)")
	device := fs.String("device", "auto", "auto, gpu or cpu: where each capture runs")
	allSnaps := fs.Bool("snapshot-all", false, "write every case's snapshot (the page's document of its positions) into its --out directory, not only a failing case's")
	share := fs.String("share", "", "post each snapshot written to the logitscope server at URL and print its link beside the failing metric; the write token, if the server has one, is read from $"+serve.TokenEnv)
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	if *suitePath == "" {
		return fmt.Errorf("--suite FILE is required")
	}
	if *rt != "wasm" && *rt != "native" {
		return fmt.Errorf("--runtime %q: want wasm or native", *rt)
	}
	shard, err := conform.ParseShard(*shardFlag)
	if err != nil {
		return err
	}
	s, err := conform.Load(*suitePath)
	if err != nil {
		return err
	}
	if *outDir == "" {
		if *outDir, err = os.MkdirTemp("", "logitscope-conform-"); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "conform: suite %s, runtime %s, output in %s\n", s.Name, *rt, *outDir)
	co := capture.Options{Device: *device, Runtime: *rt, Engine: *enginePath}
	if progress.IsTerminal(stderr) {
		co.Progress = progress.New(stderr) // else each case's capture.log has it
	}
	opt := conform.Options{Capture: co, Out: *outDir, Shard: shard, Log: stderr, AllSnapshots: *allSnaps}
	if *share != "" {
		opt.Share = func(doc []byte) (string, error) { return shareSnapshot(doc, "", *share) }
	}
	sum, err := conform.Run(s, opt)
	if err != nil {
		return err
	}
	if err := writeResults(sum, stdout, *junitPath); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d passed, %d failed, %d errors; details in %s\n", sum.Passed, sum.Failed, sum.Errors, *outDir)
	return sum.Err()
}

// conformMerge combines the --out directories of a suite's shards into one
// summary, table, JUnit file and exit status, as if one machine had run
// the suite (conform.Merge).
func conformMerge(args []string, stdout io.Writer) error {
	fs := newFlags("conform merge", stdout)
	junitPath := fs.String("junit", "", "write the merged JUnit XML to FILE")
	outDir := fs.String("out", "", "write the merged summary.json into DIR")
	dirs, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return fmt.Errorf("merge: give the --out directories (or summary.json files) of every shard")
	}
	if *outDir != "" {
		// The merged summary.json must not replace a shard's own.
		for _, d := range dirs {
			if sameFile(filepath.Join(*outDir, "summary.json"), d) || sameFile(*outDir, d) {
				return fmt.Errorf("merge: --out %s is shard %s's own directory: its summary.json would be replaced; give another", *outDir, d)
			}
		}
	}
	sum, err := conform.Merge(dirs)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			return err
		}
		sum.Out = *outDir
		if err := sum.Write(*outDir); err != nil {
			return err
		}
	}
	if err := writeResults(sum, stdout, *junitPath); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d passed, %d failed, %d errors in %d shards of suite %s\n", sum.Passed, sum.Failed, sum.Errors, len(dirs), sum.Suite)
	return sum.Err()
}

// writeResults prints a run's (or a merge's) table and writes its JUnit
// file when one is asked for.
func writeResults(sum *conform.Summary, stdout io.Writer, junitPath string) error {
	if err := sum.WriteTable(stdout); err != nil {
		return err
	}
	if junitPath == "" {
		return nil
	}
	return sum.WriteJUnit(junitPath)
}

// sameFile says whether a and b name the same existing file or directory.
func sameFile(a, b string) bool {
	x, err1 := os.Stat(a)
	y, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(x, y)
}
