package llamacpp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/format/chain"
)

// Builds are the llama.cpp builds a session can run on, as
// capture --runtime llama.cpp:BUILD names them.
var Builds = []string{"cpu", "vulkan"}

// FlashAttn are the flash attention settings llama.cpp takes
// (llama_flash_attn_type): auto lets it decide per device.
var FlashAttn = []string{"auto", "on", "off"}

// KVTypes are the KV cache types llama.cpp's tools offer (common's
// --cache-type-k and --cache-type-v); the quantized ones need flash
// attention.
var KVTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}

// SessionOptions are everything of a llama.cpp context that changes its
// numbers, each recorded in what the session reports (Settings).
type SessionOptions struct {
	Build     string // cpu (default) or vulkan: the prebuilt library, and the device it runs on
	Threads   int    // n_threads and n_threads_batch; 0: llama.cpp's default
	Ctx       int    // n_ctx: the most positions a sequence reaches
	Batch     int    // n_batch: the most tokens one Decode takes (the capture's chunk); 0: 512
	UBatch    int    // n_ubatch: the most tokens one graph computes; 0: Batch
	FlashAttn string // auto (""), on, off
	TypeK     string // the KV cache's types, as ggml names them (f16 "", f32, q8_0, ...)
	TypeV     string
}

// defaults fills what o leaves zero with llama.cpp's defaults (the KV
// cache's f16, flash attention auto) and a batch of 512.
func (o SessionOptions) defaults() SessionOptions {
	if o.Build == "" {
		o.Build = "cpu"
	}
	if o.Batch == 0 {
		o.Batch = 512
	}
	if o.UBatch == 0 {
		o.UBatch = o.Batch
	}
	if o.FlashAttn == "" {
		o.FlashAttn = "auto"
	}
	if o.TypeK == "" {
		o.TypeK = "f16"
	}
	if o.TypeV == "" {
		o.TypeV = "f16"
	}
	return o
}

// Check refuses a build or flash attention setting that does not exist
// and sizes that llama.cpp would not take, naming the accepted values.
func (o SessionOptions) Check() error {
	o = o.defaults()
	switch {
	case !slices.Contains(Builds, o.Build):
		return fmt.Errorf("llama.cpp build %q: want one of %s", o.Build, strings.Join(Builds, ", "))
	case !slices.Contains(FlashAttn, o.FlashAttn):
		return fmt.Errorf("llama.cpp flash attention %q: want one of %s", o.FlashAttn, strings.Join(FlashAttn, ", "))
	case !slices.Contains(KVTypes, o.TypeK):
		return fmt.Errorf("llama.cpp KV cache type (K) %q: want one of %s", o.TypeK, strings.Join(KVTypes, ", "))
	case !slices.Contains(KVTypes, o.TypeV):
		return fmt.Errorf("llama.cpp KV cache type (V) %q: want one of %s", o.TypeV, strings.Join(KVTypes, ", "))
	case o.Threads < 0 || o.Ctx < 1 || o.Batch < 1 || o.UBatch < 1 || o.UBatch > o.Batch:
		return fmt.Errorf("llama.cpp context: %d threads, %d positions, batch %d, ubatch %d: want threads >= 0, positive sizes and ubatch <= batch",
			o.Threads, o.Ctx, o.Batch, o.UBatch)
	}
	return nil
}

// Settings are what a session ran with, as llama.cpp's context took them,
// and the library that ran: the backend link of a receipt's chain
// records them as they are.
type Settings = chain.LlamaCpp

// Session is one llama.cpp context with one sequence, kept open in a
// harness process: Decode appends tokens at the next positions and
// returns the rows asked for, Reset empties the sequence. Not safe for
// concurrent use.
type Session struct {
	Vocab    int
	Settings Settings
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	stderr   bytes.Buffer
	pos, ctx int
	batch    int
}

// Want says which rows a Decode returns.
type Want int32

const (
	None Want = iota // no row
	Last             // the last token's row
	All              // every token's row
)

// OpenSession starts a session of model (a GGUF file) on the build
// opt.Build names, for a program: an error says what to install.
func OpenSession(model string, opt SessionOptions) (*Session, error) {
	if err := opt.Check(); err != nil {
		return nil, err
	}
	opt = opt.defaults()
	b := cpuBuild
	if opt.Build == "vulkan" {
		b = vulkanBuild
	}
	if why := b.missing(); why != "" {
		return nil, fmt.Errorf("llama.cpp: %s", why)
	}
	h, err := b.open()
	if err != nil {
		return nil, err
	}
	return h.Session(model, opt)
}

// Session starts a session of model on h's build (opt.Build is h's).
func (h *H) Session(model string, opt SessionOptions) (*Session, error) {
	opt.Build = h.b.name
	if err := opt.Check(); err != nil {
		return nil, err
	}
	opt = opt.defaults()
	flash := map[string]string{"auto": "-1", "off": "0", "on": "1"}[opt.FlashAttn]
	gpu := "0"
	if opt.Build != "cpu" {
		gpu = "1"
	}
	cmd := exec.Command(h.exe, h.bins, "serve", model, gpu, strconv.Itoa(opt.Threads), strconv.Itoa(opt.Ctx),
		strconv.Itoa(opt.Batch), strconv.Itoa(opt.UBatch), flash, opt.TypeK, opt.TypeV)
	if opt.Build == "vulkan" && os.Getenv("GGML_VK_VISIBLE_DEVICES") == "" {
		// llama.cpp's Vulkan skips a CPU-type device (lavapipe) unless
		// it is named; a machine with a real GPU lists it first.
		cmd.Env = append(os.Environ(), "GGML_VK_VISIBLE_DEVICES=0")
	}
	s := &Session{cmd: cmd, ctx: opt.Ctx, batch: opt.Batch}
	cmd.Stderr = &s.stderr
	var err error
	if s.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var hdr [2]int32
	if err := binary.Read(s.out, binary.LittleEndian, &hdr); err != nil {
		return nil, s.fail(fmt.Errorf("opening %s", model))
	}
	text := make([]byte, hdr[1])
	if _, err := io.ReadFull(s.out, text); err != nil {
		return nil, s.fail(fmt.Errorf("opening %s", model))
	}
	s.Vocab = int(hdr[0])
	s.Settings = parseSettings(string(text))
	s.Settings.Build, s.Settings.FlashAsked = opt.Build, opt.FlashAttn
	s.Settings.Package, s.Settings.Source = h.b.identity()
	return s, nil
}

// parseSettings reads the serve command's key=value lines.
func parseSettings(text string) Settings {
	kv := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = strings.TrimSpace(v)
		}
	}
	num := func(k string) int { n, _ := strconv.Atoi(kv[k]); return n }
	return Settings{Device: kv["device"], FlashAttn: kv["flash_attn"], TypeK: kv["type_k"], TypeV: kv["type_v"],
		Threads: num("threads"), ThreadsBatch: num("threads_batch"), Ctx: num("ctx"), Batch: num("batch"), UBatch: num("ubatch"),
		System: kv["system"]}
}

// identity is the npm package of the build's libraries (name@version)
// and the llama.cpp commit of the bundle they were built from.
func (b *build) identity() (pkg, source string) {
	// bins is .../node_modules/@node-llama-cpp/NAME/bins/NAME.
	pj, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(b.bins)), "package.json"))
	if err == nil {
		var p struct{ Name, Version string }
		if json.Unmarshal(pj, &p) == nil {
			pkg = p.Name + "@" + p.Version
		}
	}
	if out, err := exec.Command("git", "bundle", "list-heads", bundle).Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) > 0 {
			source = "llama.cpp@" + f[0]
		}
	}
	return pkg, source
}

// fail ends the harness and returns err with what it said on stderr.
func (s *Session) fail(err error) error {
	s.in.Close()
	werr := s.cmd.Wait()
	msg := strings.TrimSpace(s.stderr.String())
	if msg == "" && werr != nil {
		msg = werr.Error()
	}
	return fmt.Errorf("llama.cpp: %v: %s", err, msg)
}

// Reset empties the sequence: the next Decode starts at position 0.
func (s *Session) Reset() error {
	if err := binary.Write(s.in, binary.LittleEndian, int32(0)); err != nil {
		return s.fail(err)
	}
	var ack int32
	if err := binary.Read(s.out, binary.LittleEndian, &ack); err != nil {
		return s.fail(fmt.Errorf("reset"))
	}
	s.pos = 0
	return nil
}

// Decode runs ids (at most the batch) at the sequence's next positions as
// one llama_decode and returns the rows want asks for.
func (s *Session) Decode(ids []int, want Want) ([][]float32, error) {
	if len(ids) == 0 || len(ids) > s.batch {
		return nil, fmt.Errorf("llama.cpp: %d tokens in one decode, the batch holds 1 to %d", len(ids), s.batch)
	}
	if s.pos+len(ids) > s.ctx {
		return nil, fmt.Errorf("llama.cpp: positions %d..%d past the context of %d", s.pos, s.pos+len(ids)-1, s.ctx)
	}
	req := make([]int32, 3+len(ids))
	req[0], req[1], req[2] = 1, int32(want), int32(len(ids))
	for i, id := range ids {
		if id < 0 || id >= s.Vocab {
			return nil, fmt.Errorf("llama.cpp: position %d: id %d outside the vocabulary of %d", s.pos+i, id, s.Vocab)
		}
		req[3+i] = int32(id)
	}
	if err := binary.Write(s.in, binary.LittleEndian, req); err != nil {
		return nil, s.fail(err)
	}
	var n int32
	if err := binary.Read(s.out, binary.LittleEndian, &n); err != nil {
		return nil, s.fail(fmt.Errorf("decode at position %d", s.pos))
	}
	s.pos += len(ids)
	buf := make([]byte, int(n)*s.Vocab*4)
	if _, err := io.ReadFull(s.out, buf); err != nil {
		return nil, s.fail(fmt.Errorf("reading %d rows", n))
	}
	rows := make([][]float32, n)
	for r := range rows {
		row := make([]float32, s.Vocab)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*(r*s.Vocab+i):]))
		}
		rows[r] = row
	}
	return rows, nil
}

// Close ends the harness process.
func (s *Session) Close() error {
	s.in.Close()
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("llama.cpp: %v: %s", err, strings.TrimSpace(s.stderr.String()))
	}
	return nil
}
