package capture

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/run/session"
)

// LlamaCpp is the runtime that runs a GGUF file through llama.cpp's own
// library (the prebuilt libllama of node-llama-cpp, package llamacpp):
// llama.cpp, llama.cpp:cpu or llama.cpp:vulkan.
const LlamaCpp = "llama.cpp"

// Runtimes are the values of Options.Runtime.
var Runtimes = []string{"auto", "native", "wasm", LlamaCpp, LlamaCpp + ":cpu", LlamaCpp + ":vulkan"}

// CheckRuntime refuses a runtime that does not exist, naming those that
// do.
func CheckRuntime(rt string) error {
	if rt != "" && !slices.Contains(Runtimes, rt) {
		return fmt.Errorf("--runtime %q: want one of %s", rt, strings.Join(Runtimes, ", "))
	}
	return nil
}

// llamaBuild is the llama.cpp build a runtime names ("" for another
// runtime): llama.cpp alone is its CPU build.
func llamaBuild(rt string) string {
	switch rt {
	case LlamaCpp, LlamaCpp + ":cpu":
		return "cpu"
	case LlamaCpp + ":vulkan":
		return "vulkan"
	}
	return ""
}

// llamaModel is the GGUF file llama.cpp runs for variantName: the
// variant when it is a GGUF file, else a model opened from one; llama.cpp
// reads nothing else.
func llamaModel(ck *checkpoint.Checkpoint, variantName string) (string, error) {
	switch {
	case gguf.IsFileName(variantName):
		return variantName, nil
	case ck.GGUF != "" && engine.VariantDir(ck.Dir, variantName) == "":
		return ck.GGUF, nil
	}
	return "", fmt.Errorf("--runtime %s runs GGUF files only: give --variant FILE.gguf or --model FILE.gguf (variant %q is logitscope's own)",
		LlamaCpp, VariantLabel(variantName))
}

// checkLlamaCpp refuses what llama.cpp cannot run before anything opens:
// weights that are not a GGUF file, logitscope's emulation of its
// rounding, a device the build does not run on, settings that do not
// exist.
func checkLlamaCpp(ck *checkpoint.Checkpoint, variantName, build string, opt Options) error {
	if _, err := llamaModel(ck, variantName); err != nil {
		return err
	}
	switch {
	case opt.Activations == engine.ActsQ8:
		return fmt.Errorf("--activations %s emulates llama.cpp's CPU rounding in logitscope's engine; --runtime %s runs llama.cpp itself", engine.ActsQ8, LlamaCpp)
	case build == "cpu" && opt.Device == "gpu", build == "vulkan" && opt.Device == "cpu":
		return fmt.Errorf("--device %s with --runtime %s:%s: the runtime names llama.cpp's device (%s:cpu or %s:vulkan)", opt.Device, LlamaCpp, build, LlamaCpp, LlamaCpp)
	}
	o := opt.LlamaCpp
	o.Build, o.Ctx = build, 1
	return o.Check()
}

// llamaOptions are opt.LlamaCpp for req on the build rt names: the
// context holds the request's longest sequence.
func llamaOptions(rt string, req session.Request, opt Options) llamacpp.SessionOptions {
	o := opt.LlamaCpp
	o.Build, o.Ctx = llamaBuild(rt), max(req.Capacity(), 1)
	return o
}

// runLlamaCpp runs req through llama.cpp on the GGUF file variantName
// names, in the chunks logitscope's own engines take (session.Drive on
// a llama.cpp context), and records the context's settings in c.
func runLlamaCpp(ck *checkpoint.Checkpoint, variantName, rt string, req session.Request, opt Options, c *Capture) error {
	path, err := llamaModel(ck, variantName)
	if err != nil {
		return err
	}
	s, err := llamacpp.OpenSession(path, llamaOptions(rt, req, opt))
	if err != nil {
		return err
	}
	defer s.Close()
	e := &llamaEngine{s: s}
	if s.Vocab != ck.Config.VocabSize {
		return fmt.Errorf("%s: llama.cpp reads a vocabulary of %d tokens, %s says %d", path, s.Vocab, ck.Source(), ck.Config.VocabSize)
	}
	c.Device, c.LlamaCpp = e.Name(), &s.Settings
	fmt.Fprintf(opt.Log, "device: %s (flash attention %s, KV %s/%s, %d threads, batch %d/%d)\n", c.Device,
		s.Settings.FlashAttn, s.Settings.TypeK, s.Settings.TypeV, s.Settings.Threads, s.Settings.Batch, s.Settings.UBatch)
	start := time.Now()
	defer func() { c.Took = time.Since(start) }()
	opt.Progress.Start(int64(opt.tokens(req)), "capture "+string(req.Mode)+" (llama.cpp)", "tokens")
	defer opt.Progress.Done()
	err = drive(req, opt, c, func(req session.Request) (session.Result, error) {
		return session.DriveTracked(e, req, func(n int) { opt.Progress.Add(int64(n)) })
	})
	if err == nil {
		err = e.err
	}
	return err
}

// llamaEngine is a llama.cpp session as an engine.Engine, so that the
// request runs through the same state machine as on logitscope's
// engines.
type llamaEngine struct {
	s   *llamacpp.Session
	err error // a failed Reset, reported by the next Submit
}

func (e *llamaEngine) Name() string {
	return LlamaCpp + ":" + e.s.Settings.Build + ": " + e.s.Settings.Device
}
func (e *llamaEngine) Vocab() int  { return e.s.Vocab }
func (e *llamaEngine) Routes() int { return 0 }
func (e *llamaEngine) Chunk() int  { return e.s.Settings.Batch }

func (e *llamaEngine) Submit(tokens []int, want engine.Want) (engine.Region, error) {
	if e.err != nil {
		return engine.Region{}, e.err
	}
	w := map[engine.Want]llamacpp.Want{engine.None: llamacpp.None, engine.Last: llamacpp.Last, engine.All: llamacpp.All}[want]
	rows, err := e.s.Decode(tokens, w)
	if err != nil {
		return engine.Region{}, err
	}
	host := make([]float32, 0, len(rows)*e.s.Vocab)
	for _, r := range rows {
		host = append(host, r...)
	}
	return engine.Region{Rows: len(rows), Size: int64(len(host) * 4), Host: host}, nil
}

func (e *llamaEngine) Read(r engine.Region) ([][]float32, error) {
	rows := make([][]float32, r.Rows)
	for i := range rows {
		rows[i] = r.Host[i*e.s.Vocab : (i+1)*e.s.Vocab : (i+1)*e.s.Vocab]
	}
	return rows, nil
}

func (e *llamaEngine) Reset() {
	if e.err == nil {
		e.err = e.s.Reset()
	}
}

// Close leaves the session to runLlamaCpp, which opened it.
func (e *llamaEngine) Close() {}

// errEngineFlag is the refusal of --engine where engine.wasm does not run.
var errEngineFlag = errors.New("--engine names engine.wasm, which only --runtime wasm (or auto) runs")
