package prereq

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Skip and Fatal end the calling goroutine
// as the real ones do, recording which ended it.
type recorder struct {
	testing.TB
	ended string // "skip: msg" or "fail: msg"
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.ended = "skip: " + fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.ended = "fail: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A missing component skips a test on a developer's machine, saying what
// is missing first, and fails it under CI.
func TestMissing(t *testing.T) {
	for _, c := range []struct {
		ci   string
		want string
	}{
		{"", "skip: missing Vulkan: no adapter"},
		{"false", "skip: missing Vulkan: no adapter"},
		{"true", "fail: missing Vulkan: no adapter (CI=true: CI installs Vulkan, so a missing one fails the test instead of skipping it)"},
		{"1", "fail: missing Vulkan: no adapter (CI=1: "},
	} {
		t.Setenv("CI", c.ci)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Missing(r, Vulkan, "no adapter")
			r.ended = "returned"
		}()
		<-done
		if !strings.HasPrefix(r.ended, c.want) {
			t.Errorf("CI=%q: %q, want %q", c.ci, r.ended, c.want)
		}
	}
}

// notSetup are the skips that are not about a missing install, each with
// why it may skip under CI too: every other Skip in the repository must
// go through Missing, so that CI cannot pass with a component's tests
// skipped. A new skip has to be added here, deliberately.
var notSetup = map[string]struct {
	n   int
	why string
}{
	"internal/engine/internal/cpu/kernel_test.go":             {2, "the assembly kernels need AVX-512, which the CI machine's CPU may lack"},
	"internal/engine/internal/cpu/a8_test.go":                 {3, "the 8-bit-activation assembly needs AVX-512 VNNI, which the CI machine's CPU may lack"},
	"internal/sys/exp64/exp_test.go":                          {2, "the exponential's assembly needs AVX-512 DQ, which the CI machine's CPU may lack"},
	"internal/engine/internal/cpu/a8_amd64_test.go":           {1, "the 8-bit-activation assembly needs AVX-512 VNNI, which the CI machine's CPU may lack"},
	"internal/engine/internal/cpu/kernel_linux_amd64_test.go": {1, "the 8-bit-activation assembly needs AVX-512 VNNI, which the CI machine's CPU may lack"},
	"internal/engine/internal/gpuengine/bench_test.go":        {1, "the subgroup lanes' benchmark needs subgroups of at least a matmul row's 8 lanes, which a device may lack (SwiftShader's are 4)"},
	"internal/gpu/native/misuse_test.go":                      {1, "the no-driver test cannot hide a driver that the loader finds anyway"},
	"internal/gpu/native/bind_test.go":                        {2, "a device's limits (offset alignment, buffer size) below what the test exercises"},
	"internal/peer/llamacpp/llamacpp.go":                      {2, "llama.cpp's prebuilt libraries exist for linux/amd64 only: nothing to install elsewhere; its Vulkan build is for benchmarks, which CI does not install"},
	"cmd/serve/container_test.go":                             {1, "-short leaves out the container recipe's cold builds (minutes); make test and CI do not pass -short, so they run it"},
	"web/e2e/peers_bench_test.go":                             {4, "the browser peers (wllama, onnxruntime-web, PyTorch for the ONNX export) are for benchmarks, which CI does not install (make bench-deps)"},
}

var skipCall = regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)

func TestEverySkipIsAccountedFor(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	found := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasPrefix(rel, "internal/sys/prereq/") {
			return nil // prereq's own files call Skip on purpose
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := len(skipCall.FindAll(b, -1)); n > 0 {
			found[rel] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for file, n := range found {
		if notSetup[file].n != n {
			t.Errorf("%s calls Skip %d times, %d listed: a test that skips for a missing component calls prereq.Missing (so that CI fails it); any other skip goes into notSetup with its reason", file, n, notSetup[file].n)
		}
	}
	for file := range notSetup {
		if found[file] == 0 {
			t.Errorf("%s is listed in notSetup but skips nothing: remove it", file)
		}
	}
}

func ExampleMessage() {
	fmt.Println(Message(Chromium, "no /usr/bin/chromium (apt-get install chromium)"))
	// Output: missing Chromium: no /usr/bin/chromium (apt-get install chromium)
}
