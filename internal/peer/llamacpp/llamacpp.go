// Package llamacpp puts llama.cpp's own libraries behind a Go API, as the
// oracle that logitscope's tests and benchmarks compare against: ggml's
// reference dequantization and quantization, llama.cpp's model quantizer
// and its forward pass, timed on the CPU or on a Vulkan device. One
// program uses it too: export --type quantizes with llama.cpp's own
// quantizer (Open, QuantizeFile), so that its recipes need no checkout.
//
// The libraries are the prebuilt linux-x64 ones that node-llama-cpp's npm
// packages ship: the CPU build (@node-llama-cpp/linux-x64), installed by
// `make deps` into internal/peer/llamacpp/testdata/npm, and, for benchmarks only, the
// Vulkan build (@node-llama-cpp/linux-x64-vulkan), installed by
// `make bench-deps` into internal/peer/llamacpp/testdata/npm-vulkan (each pinned by its
// package-lock.json, scripts off). node-llama-cpp's own package carries
// the git bundle of the llama.cpp source they were built from, whose
// headers the harness compiles against, so that the declarations always
// match the binaries. The harness (harness/harness.c, in a directory of
// its own because the go command refuses C files in a package without
// cgo) is compiled with cc on first use into the user cache, once per
// build, and reused while harness.c, the lock files and the install
// location stay the same. Each call runs it once, exchanging raw
// little-endian data on its stdin and stdout.
//
// A test that needs the CPU harness skips on a developer machine that
// lacks npm's install, cc or git, and fails under CI (CI set), which
// installs them: a skip there would hide a broken install. The Vulkan
// harness skips wherever it is not installed.
package llamacpp

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/sys/cachedir"
	"logitscope/internal/sys/prereq"
)

// dir is this package's source directory, wherever the test runs from.
var dir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}()

var (
	npmDir = filepath.Join(dir, "testdata", "npm")
	// bundle is the llama.cpp source the libraries were built from.
	bundle = filepath.Join(npmDir, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle")
)

// A build is one of node-llama-cpp's prebuilt builds of llama.cpp, all of
// the same llama.cpp (the bundle's): the harness is compiled once per
// build, against its libraries.
type build struct {
	name    string
	npm     string   // the npm dir that installs it, with its lock file
	bins    string   // libllama, libggml, libggml-base, the CPU variants and any GPU backend
	libs    []string // what the harness links, in bins
	install string   // how to install it
	ci      bool     // whether CI installs it (a missing install fails there)

	once sync.Once
	h    *H
	err  error
	dir  string // where the harness was built (or found)
}

var cpuBuild = &build{
	name:    "cpu",
	npm:     npmDir,
	bins:    filepath.Join(npmDir, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64"),
	libs:    []string{"libllama.v0.4.0.so", "libggml.v0.4.0.so", "libggml-base.so"},
	install: "apt-get install gcc git nodejs npm; make deps (npm ci --ignore-scripts --omit=optional --prefix internal/peer/llamacpp/testdata/npm)",
	ci:      true,
}

// vulkanBuild is llama.cpp's Vulkan build, for benchmarks only (make
// bench-deps installs it; make deps does not, so tests stay lean): the
// harness links its libllama, and ggml loads its Vulkan backend beside
// the CPU ones.
var vulkanBuild = func() *build {
	npm := filepath.Join(dir, "testdata", "npm-vulkan")
	return &build{
		name:    "vulkan",
		npm:     npm,
		bins:    filepath.Join(npm, "node_modules", "@node-llama-cpp", "linux-x64-vulkan", "bins", "linux-x64-vulkan"),
		libs:    []string{"libllama.vulkan.v0.4.0.so", "libggml.vulkan.v0.4.0.so", "libggml-base.so"},
		install: "apt-get install gcc git nodejs npm libvulkan1 mesa-vulkan-drivers; make bench-deps (npm ci --ignore-scripts --prefix internal/peer/llamacpp/testdata/npm-vulkan, and make deps for the headers)",
	}
}()

// H is a built harness.
type H struct {
	b     *build
	exe   string
	bins  string // argv[1]: where ggml loads its backends from
	types map[ggml.Type]typeInfo
}

type typeInfo struct {
	name                  string
	blockSize, blockBytes int
}

// Harness returns the harness of llama.cpp's CPU build, building it on
// the first call of the process. It skips the test when what the build
// needs is missing (and fails it under CI); a build that fails with
// everything present fails it.
func Harness(tb testing.TB) *H {
	tb.Helper()
	return cpuBuild.harness(tb)
}

// VulkanHarness returns the harness of llama.cpp's Vulkan build, as
// Harness does; it skips (also under CI, which does not install it) when
// the Vulkan build is not installed. Its Bench runs on the GPU.
func VulkanHarness(tb testing.TB) *H {
	tb.Helper()
	return vulkanBuild.harness(tb)
}

func (b *build) harness(tb testing.TB) *H {
	tb.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		// Not a missing install: no prebuilt library exists here to install.
		tb.Skipf("llama.cpp's prebuilt libraries in @node-llama-cpp are for linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if why := b.missing(); why != "" {
		if b.ci {
			prereq.Missing(tb, prereq.LlamaCpp, why)
		}
		tb.Skip(prereq.Message(prereq.LlamaCpp+" ("+b.name+" build, for benchmarks)", why))
	}
	h, err := b.open()
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// missing says what the build lacks, or "".
func (b *build) missing() string {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return fmt.Sprintf("llama.cpp's prebuilt libraries in @node-llama-cpp are for linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, tool := range []string{"cc", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found; the llama.cpp harness needs cc, git and the npm install: " + b.install
		}
	}
	for _, f := range []string{filepath.Join(b.bins, b.libs[0]), bundle} {
		if _, err := os.Stat(f); err != nil {
			return "llama.cpp's " + b.name + " build is not installed (" + f + " missing); " + b.install
		}
	}
	return ""
}

// open builds the harness on the first call of the process.
func (b *build) open() (*H, error) {
	b.once.Do(func() { b.h, b.err = b.build() })
	if b.err != nil {
		return nil, fmt.Errorf("building the llama.cpp %s harness: %v", b.name, b.err)
	}
	return b.h, nil
}

// Open is Harness for a program: the CPU build's harness, or an error
// that says what to install.
func Open() (*H, error) {
	if why := cpuBuild.missing(); why != "" {
		return nil, fmt.Errorf("llama.cpp: %s", why)
	}
	return cpuBuild.open()
}

// BuildDir is the cache directory the CPU harness was built in or found
// in (empty before the first Harness call).
func BuildDir() string { return cpuBuild.dir }

// build finds the harness in the cache or builds it there.
func (b *build) build() (*H, error) {
	src, err := os.ReadFile(filepath.Join(dir, "harness", "harness.c"))
	if err != nil {
		return nil, err
	}
	key, err := b.key(src)
	if err != nil {
		return nil, err
	}
	if b.dir, err = cached("llamacpp-"+key, "harness", b.compile); err != nil {
		return nil, err
	}
	exe := filepath.Join(b.dir, "harness")
	h := &H{b: b, exe: exe, bins: b.bins}
	if err := h.loadTypes(); err != nil {
		return nil, err
	}
	return h, nil
}

// extract writes the bundle's files under paths (folders of the llama.cpp
// tree) into dst.
func extract(dst string, paths ...string) error {
	git := dst + ".git"
	if out, err := exec.Command("git", "clone", "--bare", "--quiet", bundle, git).CombinedOutput(); err != nil {
		return fmt.Errorf("git clone %s: %v\n%s", bundle, err, out)
	}
	defer os.RemoveAll(git) // 35 MB: only paths are needed
	arch := exec.Command("git", append([]string{"--git-dir", git, "archive", "--format=tar", "HEAD"}, paths...)...)
	var stderr bytes.Buffer
	arch.Stderr = &stderr
	tarball, err := arch.Output()
	if err != nil {
		return fmt.Errorf("git archive of %s: %v\n%s", strings.Join(paths, " "), err, stderr.Bytes())
	}
	return untar(tarball, dst)
}

// key names a build of what depends on own (a source, a name), the lock
// files that pin the libraries and the headers, and the libraries'
// location (a binary's rpath points into it).
func (b *build) key(own []byte) (string, error) {
	sum := sha256.New()
	parts := [][]byte{own, []byte(b.bins)}
	for _, npm := range []string{npmDir, b.npm} {
		lock, err := os.ReadFile(filepath.Join(npm, "package-lock.json"))
		if err != nil {
			return "", err
		}
		parts = append(parts, lock)
	}
	for _, part := range parts {
		fmt.Fprintf(sum, "%d:", len(part))
		sum.Write(part)
	}
	return hex.EncodeToString(sum.Sum(nil))[:16], nil
}

// cached returns the cache directory name that holds exe, made by
// compile into a fresh directory when it is not there yet.
func cached(name, exe string, compile func(tmp string) error) (string, error) {
	root, err := cachedir.Root("the harness")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, name)
	return dir, cachedir.Fill(dir, exe, compile)
}

// compile extracts the headers from the bundle into tmp/include and
// compiles the harness into tmp/harness.
func (b *build) compile(tmp string) error {
	inc := filepath.Join(tmp, "include")
	if err := extract(inc, "include", "ggml/include"); err != nil {
		return err
	}
	args := []string{"-std=gnu11", "-O2", "-Wall",
		"-I", filepath.Join(inc, "include"), "-I", filepath.Join(inc, "ggml", "include"),
		"-o", filepath.Join(tmp, "harness"), filepath.Join(dir, "harness", "harness.c")}
	for _, lib := range b.libs {
		args = append(args, filepath.Join(b.bins, lib))
	}
	cc := exec.Command("cc", append(args, "-lm", "-Wl,-rpath,"+b.bins)...)
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
	out, err := h.exec(nil, nil, "types")
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

// exec runs the harness with stdin and env added to the environment and
// returns its stdout; the error carries its stderr.
func (h *H) exec(env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command(h.exe, append([]string{h.bins}, args...)...)
	cmd.Env = append(os.Environ(), env...)
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
	out, err := h.exec(nil, stdin, args...)
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
	return h.QuantizeImatrix(tb, t, x, nil, rows, cols)
}

// QuantizeImatrix is Quantize with an importance matrix (one weight per
// column; nil for none), as llama-quantize --imatrix passes it: the
// lowest-bit i-quants (IQ1_*, IQ2_XXS, IQ2_XS) refuse to quantize without.
func (h *H) QuantizeImatrix(tb testing.TB, t ggml.Type, x, imatrix []float32, rows, cols int) []byte {
	tb.Helper()
	if len(x) != rows*cols || imatrix != nil && len(imatrix) != cols {
		tb.Fatalf("llamacpp.Quantize: %d weights and %d importances for %d x %d", len(x), len(imatrix), rows, cols)
	}
	ti := h.info(tb, t)
	args := []string{"quantize", strconv.Itoa(int(t)), strconv.Itoa(rows), strconv.Itoa(cols)}
	if imatrix != nil {
		args = append(args, "imatrix")
	}
	out := h.run(tb, append(floatBytes(imatrix), floatBytes(x)...), args...)
	if want := rows * cols / ti.blockSize * ti.blockBytes; len(out) != want {
		tb.Fatalf("llamacpp.Quantize: harness returned %d bytes, want %d", len(out), want)
	}
	return out
}

// Importance is an importance matrix for a row of cols weights of type
// t, for QuantizeImatrix: nil, except for the i-quants of 1 and 2 bits,
// which llama.cpp refuses to quantize without one; for those a smooth,
// uneven one, so that the choices it steers are not the plain ones.
func Importance(t ggml.Type, cols int) []float32 {
	switch t {
	case ggml.IQ1_S, ggml.IQ1_M, ggml.IQ2_XXS, ggml.IQ2_XS, ggml.IQ2_S:
	default:
		return nil
	}
	w := make([]float32, cols)
	for i := range w {
		w[i] = float32(1 + 0.9*math.Sin(float64(i)*0.37))
	}
	return w
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
	if err := h.QuantizeFile(in, out, ftype); err != nil {
		tb.Fatal(err)
	}
}

// QuantizeFile is QuantizeModel for a program: llama-quantize
// [--tensor-type REGEX=TYPE ...] IN OUT FTYPE, as a function, each of
// tensorTypes a --tensor-type (the first that matches a tensor decides).
func (h *H) QuantizeFile(in, out, ftype string, tensorTypes ...string) error {
	if err := h.CheckFileType(ftype); err != nil {
		return err
	}
	_, err := h.exec(nil, nil, append([]string{"quantize-model", in, out, ftype}, tensorTypes...)...)
	return err
}

// CheckFileType refuses a file type llama-quantize does not know, listing
// those it does.
func (h *H) CheckFileType(ftype string) error {
	types, err := h.exec(nil, nil, "ftypes")
	if err != nil {
		return err
	}
	names := strings.Fields(string(types))
	if !slices.Contains(names, ftype) {
		return fmt.Errorf("llama.cpp has no file type %q: it has %s", ftype, strings.Join(names, ", "))
	}
	return nil
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

// Speed is llama.cpp's speed on a model (Bench).
type Speed struct {
	PrefillTokS, DecodeTokS float64
	PeakRSS                 int64   // bytes: the harness process's peak resident set
	WarmupS                 float64 // the warm-up pass; on Vulkan it compiles the shaders
	// Device is the ggml device that ran the model, its name and
	// description: "CPU ...", "Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits)".
	Device string
}

// BenchOptions say how Bench runs.
type BenchOptions struct {
	Gen     int // single-token steps after the prompt
	Threads int // 0: llama.cpp's default
	Reps    int // timed passes after the warm-up
	// GPU puts every layer on the first GPU device ggml has (with
	// VulkanHarness: a Vulkan device) and fails when there is none,
	// rather than let llama.cpp fall back to the CPU unasked.
	GPU bool
	// VisibleDevices, when set, is GGML_VK_VISIBLE_DEVICES: "0" makes
	// llama.cpp's Vulkan take the first Vulkan device even when it is a
	// CPU-type one (lavapipe), which it skips otherwise.
	VisibleDevices string
}

// Bench times model (a GGUF file) with llama.cpp's default context
// settings: prompt as one batch (its last row's logits), then opt.Gen
// single-token steps. After a warm-up pass it keeps the fastest of
// opt.Reps passes of each.
func (h *H) Bench(tb testing.TB, model string, prompt []int, opt BenchOptions) Speed {
	tb.Helper()
	in := make([]byte, 4*len(prompt))
	for i, id := range prompt {
		binary.LittleEndian.PutUint32(in[4*i:], uint32(int32(id)))
	}
	var env []string
	if opt.VisibleDevices != "" {
		env = append(env, "GGML_VK_VISIBLE_DEVICES="+opt.VisibleDevices)
	}
	gpu := "0"
	if opt.GPU {
		gpu = "1"
	}
	out, err := h.exec(env, in, "bench", model, strconv.Itoa(len(prompt)), strconv.Itoa(opt.Gen),
		strconv.Itoa(opt.Threads), strconv.Itoa(opt.Reps), gpu)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := parseSpeed(string(out))
	if err != nil {
		tb.Fatalf("llamacpp.Bench: %v", err)
	}
	return s
}

// parseSpeed reads the harness's bench line: prefill tok/s, decode tok/s,
// peak RSS bytes, warm-up seconds, then the device's name and description.
func parseSpeed(line string) (Speed, error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return Speed{}, fmt.Errorf("harness printed %q, want prefill, decode, RSS, warm-up and device", line)
	}
	s := Speed{Device: strings.Join(f[4:], " ")}
	var errs [4]error
	s.PrefillTokS, errs[0] = strconv.ParseFloat(f[0], 64)
	s.DecodeTokS, errs[1] = strconv.ParseFloat(f[1], 64)
	s.PeakRSS, errs[2] = strconv.ParseInt(f[2], 10, 64)
	s.WarmupS, errs[3] = strconv.ParseFloat(f[3], 64)
	if err := errors.Join(errs[:]...); err != nil {
		return Speed{}, fmt.Errorf("harness printed %q: %w", line, err)
	}
	return s, nil
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
