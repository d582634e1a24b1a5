package serve

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/demo"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/sys/progress"
)

// PrepareDemo returns the built-in demo model's directory: the trained
// model of package demo with its q8, q6 and q4 variants, writing whatever
// is missing and reporting progress to out. Later starts find it all
// cached and print nothing, so the server's URL is the first line a user
// sees. (Writing the model's files takes well under a second; only
// quantizing is worth a progress line.)
func PrepareDemo(out io.Writer) (string, error) {
	dir, err := demo.Dir()
	if err != nil {
		return "", err
	}
	var ck *checkpoint.Checkpoint
	defer func() {
		if ck != nil {
			ck.Close()
		}
	}()
	for _, scheme := range quant.Schemes {
		vdir := variant.DefaultDir(dir, string(scheme))
		if _, err := os.Stat(filepath.Join(vdir, "manifest.json")); err == nil {
			continue
		}
		if ck == nil {
			if ck, err = checkpoint.Open(dir); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(out, "logitscope serve: quantizing the demo to %s…\n", scheme)
		track := progress.Track(progress.New(out), "  "+string(scheme), "tensors")
		if err := variant.Write(ck, scheme, vdir, variant.Options{Progress: func(done, total int, _ string) { track(int64(done), int64(total)) }}); err != nil {
			return "", fmt.Errorf("demo variant %s: %w", scheme, err)
		}
	}
	return dir, nil
}
