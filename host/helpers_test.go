package host

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// fixtures are built once per test binary: engine.wasm, the tiny model
// with a q4 variant, a model of each other family, the compiled module.
var fixtures struct {
	once     sync.Once
	err      error
	tmp      string
	wasm     []byte
	modelDir string
	families map[string]string // preset → directory: tiny-qwen3, tiny-llama3, tiny-mistral, tiny-llama-bias, tiny-gemma3, the two MoE
	mod      *Module
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtures.mod != nil {
		fixtures.mod.Close(context.Background())
	}
	if fixtures.tmp != "" {
		os.RemoveAll(fixtures.tmp)
	}
	os.Exit(code)
}

// buildWasm compiles ./wasm as the wasip1 reactor into dir.
func buildWasm(dir string) ([]byte, error) {
	out := filepath.Join(dir, "engine.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "logitscope/wasm")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, &buildError{err, string(b)}
	}
	return os.ReadFile(out)
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "building engine.wasm: " + e.err.Error() + "\n" + e.out }

func setup(t testing.TB) {
	t.Helper()
	f := &fixtures
	f.once.Do(func() {
		if f.tmp, f.err = os.MkdirTemp("", "logitscope-host-"); f.err != nil {
			return
		}
		if f.wasm, f.err = buildWasm(f.tmp); f.err != nil {
			return
		}
		f.modelDir = filepath.Join(f.tmp, "tiny")
		if f.err = writeTiny(f.modelDir, quant.Q4); f.err != nil {
			return
		}
		f.families = map[string]string{}
		for _, name := range []string{"tiny-qwen3", "tiny-llama3", "tiny-mistral", "tiny-llama-bias", "tiny-gemma3", "tiny-qwen3-moe", "tiny-qwen2-moe", "tiny-glm4-moe"} {
			f.families[name] = filepath.Join(f.tmp, name)
			if f.err = synth.Write(synth.Presets[name], f.families[name], synth.Options{}); f.err != nil {
				return
			}
		}
		f.mod, f.err = Load(context.Background(), f.wasm, filepath.Join(f.tmp, "cache"))
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
}

// writeTiny writes the tiny preset into dir with a variant of scheme s.
// fresh is an instance of the fixture's engine.wasm with the fixture's
// model mounted and none open, closed when the test ends; dev serves its
// gpu imports (nil: noGPU).
func fresh(t *testing.T, dev gpu.Device) *Instance {
	t.Helper()
	ctx := context.Background()
	e, err := fixtures.mod.instantiate(ctx, dev, fixtures.modelDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	return e
}

func writeTiny(dir string, s quant.Scheme) error {
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		return err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	return variant.Write(ck, s, variant.DefaultDir(dir, string(s)), variant.Options{})
}

// goEngine opens the same model with the Go engine: on dev, or on the CPU
// reference when dev is nil.
func goEngine(t testing.TB, dev gpu.Device, dir, v string, capacity int) engine.Engine {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	vv, err := engine.OpenVariant(ck, v)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(ck, engine.Options{Variant: vv, Device: dev, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}
