package serve

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/demo"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/sys/cachedir"
	"logitscope/internal/sys/progress"
)

// demoHub is what the demo ships in hub formats (quantize --format,
// hubquant.Writers): one checkpoint per tool its users quantize with, so
// that the page offers each as a side from the first start. Groups of 64:
// the demo's 192-wide rows are not whole groups of 128.
var demoHub = []struct {
	writer string
	opt    hubquant.Options
}{
	{"gptq", hubquant.Options{Bits: 4, GroupSize: 64, Sym: true, Given: map[string]bool{"group-size": true}}},
	{"awq", hubquant.Options{Bits: 4, GroupSize: 64, Given: map[string]bool{"group-size": true}}},
	{"ct-fp8", hubquant.Options{}},
	{"mlx", hubquant.Options{Bits: 4, GroupSize: 64}},
	{"bnb-nf4", hubquant.Options{}},
}

// PrepareDemo returns the built-in demo model's directory: the trained
// model of package demo with its q8, q6 and q4 variants and a checkpoint
// in each format of demoHub under hub/, writing whatever is missing and
// reporting progress to out. Later starts find it all
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
	for _, h := range demoHub {
		f, err := hubquant.Writers[h.writer](h.opt)
		if err != nil {
			return "", fmt.Errorf("demo %s checkpoint: %w", h.writer, err)
		}
		err = cachedir.Fill(hubquant.DefaultDir(dir, f), "model.safetensors", func(tmp string) error {
			if ck == nil {
				if ck, err = checkpoint.Open(dir); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "logitscope serve: quantizing the demo to %s…\n", f.Name())
			track := progress.Track(progress.New(out), "  "+h.writer, "tensors")
			return hubquant.Write(ck, f, tmp, func(done, total int) { track(int64(done), int64(total)) })
		})
		if err != nil {
			return "", fmt.Errorf("demo %s checkpoint: %w", h.writer, err)
		}
	}
	return dir, nil
}
