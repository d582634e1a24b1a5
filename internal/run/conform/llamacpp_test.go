package conform

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/receipt"
	"logitscope/internal/peer/llamacpp"
)

// A case's runtime must exist, and llama.cpp runs GGUF tests only.
func TestLoadRuntimeErrors(t *testing.T) {
	base := `"name": "x", "model": "m", "panel": "p.txt"`
	for _, c := range []struct{ name, cases, want string }{
		{"unknown runtime", `{` + base + `, "test": "gguf:Q4_K_M", "runtime": "banana"}`, `runtime "banana": want one of auto, native, wasm, llama.cpp`},
		{"llama.cpp on a variant", `{` + base + `, "test": "q4", "runtime": "llama.cpp"}`, `runtime llama.cpp runs GGUF files: the test must be FILE.gguf or gguf:FTYPE, not "q4"`},
		{"llama.cpp with a sweep", `{` + base + `, "test": "gguf:Q4_K_M", "runtime": "llama.cpp:cpu", "sweep": {}}`, "a sweep or a recipe requantizes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "p.txt"), []byte("panel"), 0o644)
			path := filepath.Join(dir, "s.json")
			os.WriteFile(path, []byte(`{"name": "s", "cases": [`+c.cases+`]}`), 0o644)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// The llama.cpp suite's tiny cases pass on llama.cpp's CPU build (the
// conform workflow runs the whole suite): the GGUF is made once per
// model, its captures' receipts name llama.cpp and its settings, and the
// reference's do not.
func TestLlamaCppSuite(t *testing.T) {
	llamacpp.Harness(t)
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	s, err := Load("llamacpp.json")
	if err != nil {
		t.Fatal(err)
	}
	s.Cases = slices.DeleteFunc(s.Cases, func(c Case) bool { return !strings.HasPrefix(c.Name, "tiny-") })
	if len(s.Cases) != 2 {
		t.Fatalf("%d tiny cases", len(s.Cases))
	}
	out := t.TempDir()
	sum := run(t, s, "native", "", out, Shard{})
	if err := sum.Err(); err != nil || sum.Passed != len(s.Cases) {
		t.Fatalf("%d of %d passed: %v", sum.Passed, len(s.Cases), err)
	}
	for _, c := range []struct{ dump, runtime string }{
		{"tiny-q4km-llamacpp-panel/test.dump", "llama.cpp"},
		{"tiny-q4km-llamacpp-panel/ref.dump", "native"},
		{"tiny-q4km-llamacpp-prompts/test-1.dump", "llama.cpp"},
	} {
		rc, err := receipt.Read(receipt.Path(filepath.Join(out, c.dump)))
		if err != nil {
			t.Fatal(err)
		}
		b := rc.Chain.Backend
		if b.Runtime != c.runtime || (b.LlamaCpp != nil) != (c.runtime == "llama.cpp") {
			t.Errorf("%s: runtime %s, llama.cpp %+v", c.dump, b.Runtime, b.LlamaCpp)
		}
		if c.runtime == "llama.cpp" && (rc.GGUF == nil || !strings.HasSuffix(rc.Variant, "gguf-Q4_K_M.gguf")) {
			t.Errorf("%s: variant %s, gguf %+v", c.dump, rc.Variant, rc.GGUF)
		}
	}
}
