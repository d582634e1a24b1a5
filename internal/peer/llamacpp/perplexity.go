package llamacpp

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"logitscope/internal/sys/prereq"
)

// Perplexity is llama.cpp's own llama-perplexity, the tool llama.cpp users
// measure a quantization with (--kl-divergence-base, --kl-divergence):
// compiled from the bundle's tools/perplexity against the CPU build's
// libllama-common, libllama and libggml, as the harness is.
type Perplexity struct{ exe, bins string }

var perplexity struct {
	once sync.Once
	p    *Perplexity
	err  error
}

// PerplexityTool returns the tool, built on first use into the user cache
// (a few seconds: the libraries are the prebuilt ones). It needs what the
// harness needs and a C++ compiler.
func PerplexityTool(tb testing.TB) *Perplexity {
	tb.Helper()
	b := cpuBuild
	b.harness(tb) // the same prerequisites, checked the same way
	if _, err := exec.LookPath("c++"); err != nil {
		prereq.Missing(tb, prereq.LlamaCpp, "c++ not found; llama-perplexity is compiled with it: apt-get install g++")
	}
	perplexity.once.Do(func() {
		key, err := b.key([]byte("llama-perplexity"))
		if err != nil {
			perplexity.err = err
			return
		}
		dir, err := cached("llama-perplexity-"+key, "llama-perplexity", func(tmp string) error {
			src := filepath.Join(tmp, "src")
			defer os.RemoveAll(src) // the sources are needed only to compile
			if err := extract(src, "include", "ggml/include", "common", "vendor", "tools/perplexity"); err != nil {
				return err
			}
			tool := filepath.Join(src, "tools", "perplexity")
			args := []string{"-std=c++17", "-O2", "-o", filepath.Join(tmp, "llama-perplexity"),
				"-I", filepath.Join(src, "include"), "-I", filepath.Join(src, "ggml", "include"),
				"-I", filepath.Join(src, "common"), "-I", filepath.Join(src, "vendor"), "-I", tool,
				filepath.Join(tool, "perplexity.cpp"), filepath.Join(tool, "main.cpp"),
				filepath.Join(b.bins, "libllama-common.so")}
			for _, lib := range b.libs {
				args = append(args, filepath.Join(b.bins, lib))
			}
			cxx := exec.Command("c++", append(args, "-lpthread", "-Wl,-rpath,"+b.bins)...)
			if out, err := cxx.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v\n%s", strings.Join(cxx.Args, " "), err, out)
			}
			return nil
		})
		perplexity.p, perplexity.err = &Perplexity{exe: filepath.Join(dir, "llama-perplexity"), bins: b.bins}, err
	})
	if perplexity.err != nil {
		tb.Fatalf("building llama-perplexity: %v", perplexity.err)
	}
	return perplexity.p
}

// Run runs llama-perplexity with args and returns what it printed
// (stdout and stderr: its results are log lines). It runs in the
// libraries' folder, where ggml looks for its CPU backends.
func (p *Perplexity) Run(tb testing.TB, args ...string) string {
	tb.Helper()
	cmd := exec.Command(p.exe, args...)
	cmd.Dir = p.bins
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("llama-perplexity %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
	return out.String()
}
