// Package llamacpp puts llama.cpp's own libraries behind a Go API, as the
// oracle that logitscope's tests and benchmarks compare against: ggml's
// reference dequantization and quantization, llama.cpp's model quantizer
// and its CPU forward pass.
//
// The libraries are the prebuilt linux-x64 CPU ones that the npm package
// @node-llama-cpp/linux-x64 ships, installed by `make deps` into
// llamacpp/testdata/npm (pinned by its package-lock.json, scripts off).
// node-llama-cpp's own package carries the git bundle of the llama.cpp
// source they were built from, whose headers the harness compiles against,
// so that the declarations always match the binaries. The harness
// (harness/harness.c, in a directory of its own because the go command
// refuses C files in a package without cgo) is compiled with cc on first use into the user cache and
// reused while harness.c, the lock file and the install location stay the
// same. Each call runs it once, exchanging raw little-endian data on its
// stdin and stdout.
//
// A test that needs the harness skips on a developer machine that lacks
// npm's install, cc or git, and fails under CI (CI set), which installs
// them: a skip there would hide a broken install.
package llamacpp

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"logitscope/ggml"
	"logitscope/prereq"
	"logitscope/tempfile"
)

// dir is this package's source directory, wherever the test runs from.
var dir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}()

var (
	npmDir = filepath.Join(dir, "testdata", "npm")
	// binsDir holds libllama, libggml, libggml-base and the CPU variants.
	binsDir = filepath.Join(npmDir, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
	// bundle is the llama.cpp source the libraries were built from.
	bundle = filepath.Join(npmDir, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle")
)

const install = "apt-get install gcc git nodejs npm; make deps (npm ci --ignore-scripts --omit=optional --prefix llamacpp/testdata/npm)"

// H is a built harness.
type H struct {
	exe   string
	types map[ggml.Type]typeInfo
}

type typeInfo struct {
	name                  string
	blockSize, blockBytes int
}

var (
	once     sync.Once
	built    *H
	buildErr error
	// BuildDir is where the harness was built (or found), for reports.
	buildDir string
)

// Harness returns the harness, building it on the first call of the
// process. It skips the test when what the build needs is missing (and
// fails it under CI); a build that fails with everything present fails it.
func Harness(tb testing.TB) *H {
	tb.Helper()
	skip := func(why string) { tb.Helper(); prereq.Missing(tb, prereq.LlamaCpp, why) }
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		// Not a missing install: no prebuilt library exists here to install.
		tb.Skipf("llama.cpp's prebuilt libraries in @node-llama-cpp/linux-x64 are for linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, tool := range []string{"cc", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip(tool + " not found; the llama.cpp harness needs cc, git and the npm install: " + install)
		}
	}
	for _, f := range []string{filepath.Join(binsDir, "libllama.v0.4.0.so"), bundle} {
		if _, err := os.Stat(f); err != nil {
			skip("llama.cpp's npm packages are not installed (" + f + " missing); " + install)
		}
	}
	once.Do(func() { built, buildErr = build() })
	if buildErr != nil {
		tb.Fatalf("building the llama.cpp harness: %v", buildErr)
	}
	return built
}

// BuildDir is the cache directory the harness was built in or found in
// (empty before the first Harness call).
func BuildDir() string { return buildDir }

// build finds the harness in the cache or builds it there. The key covers
// what the binary depends on: harness.c, the lock file that pins the
// libraries, and their location (the binary's rpath points into it).
func build() (*H, error) {
	src, err := os.ReadFile(filepath.Join(dir, "harness", "harness.c"))
	if err != nil {
		return nil, err
	}
	lock, err := os.ReadFile(filepath.Join(npmDir, "package-lock.json"))
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	for _, part := range [][]byte{src, lock, []byte(binsDir)} {
		fmt.Fprintf(sum, "%d:", len(part))
		sum.Write(part)
	}
	root := os.Getenv("LOGITSCOPE_CACHE")
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no cache directory for the harness (set LOGITSCOPE_CACHE): %w", err)
		}
		root = filepath.Join(c, "logitscope")
	}
	buildDir = filepath.Join(root, "llamacpp-"+hex.EncodeToString(sum.Sum(nil))[:16])
	exe := filepath.Join(buildDir, "harness")
	if _, err := os.Stat(exe); err != nil {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, err
		}
		// Build beside the final place and rename: concurrent test
		// processes (go test runs packages in parallel) each build their
		// own, and the first rename wins; an interrupted build leaves
		// nothing half-made under the final name.
		tmp, err := tempfile.Mkdir(buildDir)
		if err != nil {
			return nil, err
		}
		if err := compile(tmp); err != nil {
			tempfile.Remove(tmp)
			return nil, err
		}
		if err := os.Chmod(tmp, 0o755); err != nil { // Mkdir made it private
			tempfile.Remove(tmp)
			return nil, err
		}
		err = tempfile.Commit(func() error { return os.Rename(tmp, buildDir) }, tmp)
		if _, statErr := os.Stat(exe); err != nil && statErr != nil {
			return nil, err // a loser of the race finds the winner's harness instead
		}
	}
	h := &H{exe: exe}
	if err := h.loadTypes(); err != nil {
		return nil, err
	}
	return h, nil
}

// compile extracts the headers from the bundle into tmp/include and
// compiles the harness into tmp/harness.
func compile(tmp string) error {
	git := filepath.Join(tmp, "src.git")
	if out, err := exec.Command("git", "clone", "--bare", "--quiet", bundle, git).CombinedOutput(); err != nil {
		return fmt.Errorf("git clone %s: %v\n%s", bundle, err, out)
	}
	defer os.RemoveAll(git) // 35 MB: only the headers are needed
	arch := exec.Command("git", "--git-dir", git, "archive", "--format=tar", "HEAD", "include", "ggml/include")
	var stderr bytes.Buffer
	arch.Stderr = &stderr
	tarball, err := arch.Output()
	if err != nil {
		return fmt.Errorf("git archive of the headers: %v\n%s", err, stderr.Bytes())
	}
	inc := filepath.Join(tmp, "include")
	if err := untar(tarball, inc); err != nil {
		return err
	}
	lib := func(name string) string { return filepath.Join(binsDir, name) }
	cc := exec.Command("cc", "-std=gnu11", "-O2", "-Wall",
		"-I", filepath.Join(inc, "include"), "-I", filepath.Join(inc, "ggml", "include"),
		"-o", filepath.Join(tmp, "harness"), filepath.Join(dir, "harness", "harness.c"),
		lib("libllama.v0.4.0.so"), lib("libggml.v0.4.0.so"), lib("libggml-base.so"),
		"-lm", "-Wl,-rpath,"+binsDir)
	if out, err := cc.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(cc.Args, " "), err, out)
	}
	return nil
}

// untar writes the regular files and directories of a tar stream under
// root (git archive's output: relative paths only).
func untar(tarball []byte, root string) error {
	r := tar.NewReader(bytes.NewReader(tarball))
	for {
		hdr, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading git archive: %w", err)
		}
		name := filepath.Clean(hdr.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("git archive: unexpected path %q", hdr.Name)
		}
		path := filepath.Join(root, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return err
			}
		}
	}
}

// loadTypes reads ggml's type table from the library.
func (h *H) loadTypes() error {
	out, err := h.exec(nil, "types")
	if err != nil {
		return err
	}
	h.types = map[ggml.Type]typeInfo{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			return fmt.Errorf("harness types: bad line %q", line)
		}
		var n [3]int
		for i, s := range []string{f[0], f[2], f[3]} {
			if n[i], err = strconv.Atoi(s); err != nil {
				return fmt.Errorf("harness types: bad line %q", line)
			}
		}
		h.types[ggml.Type(n[0])] = typeInfo{f[1], n[1], n[2]}
	}
	return nil
}

// exec runs the harness with stdin and returns its stdout; the error
// carries its stderr.
func (h *H) exec(stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command(h.exe, append([]string{binsDir}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("harness %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

func (h *H) run(tb testing.TB, stdin []byte, args ...string) []byte {
	tb.Helper()
	out, err := h.exec(stdin, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func (h *H) info(tb testing.TB, t ggml.Type) typeInfo {
	tb.Helper()
	ti, ok := h.types[t]
	if !ok {
		tb.Fatalf("llama.cpp has no type %d", uint32(t))
	}
	return ti
}

// TypeSize is ggml_blck_size(t) and ggml_type_size(t): weights per block
// and bytes per block, as the library has them.
func (h *H) TypeSize(tb testing.TB, t ggml.Type) (blockSize, blockBytes int) {
	tb.Helper()
	ti := h.info(tb, t)
	return ti.blockSize, ti.blockBytes
}

// TypeName is ggml_type_name(t) ("q4_K").
func (h *H) TypeName(tb testing.TB, t ggml.Type) string {
	tb.Helper()
	return h.info(tb, t).name
}

// Dequantize decodes whole blocks of type t with the type's to_float
// (ggml-base's reference dequantize_row_*; F32 is copied).
func (h *H) Dequantize(tb testing.TB, t ggml.Type, blocks []byte) []float32 {
	tb.Helper()
	ti := h.info(tb, t)
	if len(blocks)%ti.blockBytes != 0 {
		tb.Fatalf("llamacpp.Dequantize: %d bytes are not whole %d-byte %s blocks", len(blocks), ti.blockBytes, ti.name)
	}
	n := len(blocks) / ti.blockBytes * ti.blockSize
	return floats(tb, h.run(tb, blocks, "dequantize", strconv.Itoa(int(t)), strconv.Itoa(n)), n)
}

// Quantize is ggml_quantize_chunk(t, x, dst, 0, rows, cols, NULL): rows
// rows of cols weights (x holds rows*cols), quantized row by row with
// ggml's reference quantizer, without an importance matrix.
func (h *H) Quantize(tb testing.TB, t ggml.Type, x []float32, rows, cols int) []byte {
	tb.Helper()
	if len(x) != rows*cols {
		tb.Fatalf("llamacpp.Quantize: %d weights for %d x %d", len(x), rows, cols)
	}
	ti := h.info(tb, t)
	out := h.run(tb, floatBytes(x), "quantize", strconv.Itoa(int(t)), strconv.Itoa(rows), strconv.Itoa(cols))
	if want := rows * cols / ti.blockSize * ti.blockBytes; len(out) != want {
		tb.Fatalf("llamacpp.Quantize: harness returned %d bytes, want %d", len(out), want)
	}
	return out
}

// QuantizeModel runs llama_model_quantize(in, out) with
// llama_model_quantize_default_params and the file type named as
// llama-quantize names it: "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
// "Q5_1", "Q2_K", "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
// "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "TQ1_0", "TQ2_0", "IQ4_NL",
// "IQ4_XS", "IQ3_S", "IQ3_M", "MXFP4_MOE" (the LLAMA_FTYPE_MOSTLY_* value of
// llama.h).
func (h *H) QuantizeModel(tb testing.TB, in, out, ftype string) {
	tb.Helper()
	h.run(tb, nil, "quantize-model", in, out, ftype)
}

// LogitsOptions are the context settings of Logits that a comparison may
// need to pin.
type LogitsOptions struct {
	// F32KV makes attention float32 throughout: the KV cache float32
	// (type_k = type_v = GGML_TYPE_F32) instead of llama.cpp's default f16,
	// which rounds keys and values, and flash attention off, because with
	// it (llama.cpp's "auto" turns it on for the CPU) llama.cpp casts K and
	// V to f16 before attending whatever the cache holds: an f32 cache
	// alone gives the very bits of the f16 one.
	F32KV bool
	// Threads is n_threads and n_threads_batch; 0 keeps llama.cpp's
	// default.
	Threads int
}

// Logits runs model (a GGUF file) on the CPU over ids, teacher forced, and
// returns every position's full logit row: one sequence from position 0, a
// context of len(ids), decoded in batches of up to 512 with logits
// requested for every token, read with llama_get_logits_ith. Flash
// attention is llama.cpp's default (auto: on for the CPU) unless F32KV.
func (h *H) Logits(tb testing.TB, model string, ids []int, opt LogitsOptions) [][]float32 {
	tb.Helper()
	if len(ids) == 0 {
		tb.Fatal("llamacpp.Logits: no tokens")
	}
	in := make([]byte, 4*len(ids))
	for i, id := range ids {
		if id < math.MinInt32 || id > math.MaxInt32 {
			tb.Fatalf("llamacpp.Logits: token %d: id %d out of range", i, id)
		}
		binary.LittleEndian.PutUint32(in[4*i:], uint32(int32(id)))
	}
	f32kv := "0"
	if opt.F32KV {
		f32kv = "1"
	}
	out := h.run(tb, in, "logits", model, strconv.Itoa(len(ids)), f32kv, strconv.Itoa(opt.Threads))
	if len(out) < 4 {
		tb.Fatalf("llamacpp.Logits: harness returned %d bytes", len(out))
	}
	vocab := int(int32(binary.LittleEndian.Uint32(out)))
	all := floats(tb, out[4:], vocab*len(ids))
	rows := make([][]float32, len(ids))
	for i := range rows {
		rows[i] = all[i*vocab : (i+1)*vocab : (i+1)*vocab]
	}
	return rows
}

// Speed is llama.cpp's CPU speed on a model (Bench).
type Speed struct {
	PrefillTokS, DecodeTokS float64
	PeakRSS                 int64 // bytes: the harness process's peak resident set
}

// Bench times model (a GGUF file) on the CPU with llama.cpp's default
// context settings: prompt as one batch (its last row's logits), then gen
// single-token steps, on threads threads (0: llama.cpp's default). After
// a warm-up pass it keeps the fastest of reps passes of each.
func (h *H) Bench(tb testing.TB, model string, prompt []int, gen, threads, reps int) Speed {
	tb.Helper()
	in := make([]byte, 4*len(prompt))
	for i, id := range prompt {
		binary.LittleEndian.PutUint32(in[4*i:], uint32(int32(id)))
	}
	out := h.run(tb, in, "bench", model, strconv.Itoa(len(prompt)), strconv.Itoa(gen), strconv.Itoa(threads), strconv.Itoa(reps))
	var s Speed
	if _, err := fmt.Sscan(string(out), &s.PrefillTokS, &s.DecodeTokS, &s.PeakRSS); err != nil {
		tb.Fatalf("llamacpp.Bench: harness printed %q: %v", out, err)
	}
	return s
}

// WriteTinyModel writes a small Llama-architecture GGUF with ggml's own
// gguf writer: 2 layers, hidden size 256, 4 heads (2 KV heads), MLP width
// 512, 512 dummy tokens (tokenizer "none"), random f32 weights from seed.
// It is enough to exercise Logits and QuantizeModel, and it is a GGUF file
// written by the reference implementation.
func (h *H) WriteTinyModel(tb testing.TB, path string, seed uint64) {
	tb.Helper()
	h.run(tb, nil, "tiny-model", path, strconv.FormatUint(seed, 10))
}

func floats(tb testing.TB, b []byte, n int) []float32 {
	tb.Helper()
	if len(b) != 4*n {
		tb.Fatalf("llamacpp: harness returned %d bytes, want %d float32", len(b), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func floatBytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
