package serve

import (
	"bytes"
	"strings"
	"testing"
)

// PrepareDemo writes the trained demo and quantizes its three variants on
// the first start, saying so; the next start finds everything cached and
// prints nothing, so the URL stays the first line a user sees. The server
// then lists the model with every variant.
func TestPrepareDemo(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	var first bytes.Buffer
	dir, err := PrepareDemo(&first)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"q8", "q6", "q4"} {
		if !strings.Contains(first.String(), "quantizing the demo to "+s) {
			t.Errorf("first start does not say it quantizes %s:\n%s", s, first.String())
		}
	}
	var second bytes.Buffer
	again, err := PrepareDemo(&second)
	if err != nil || again != dir || second.Len() != 0 {
		t.Errorf("second start: %q, %v, printed %q; first %q", again, err, second.String(), dir)
	}
	m, err := LoadModel("demo", dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range m.Variants {
		names = append(names, v.Name)
	}
	if m.Architecture != "LlamaForCausalLM" || strings.Join(names, " ") != "q8 q6 q4" {
		t.Errorf("served as %s with variants %v, want LlamaForCausalLM with q8 q6 q4", m.Architecture, names)
	}
}
