package serve

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// PrepareDemo writes the trained demo and quantizes its three variants and
// its hub checkpoints on the first start, saying so; the next start finds
// everything cached and prints nothing, so the URL stays the first line a
// user sees. The server then lists the model with every variant and
// checkpoint.
func TestPrepareDemo(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	var first bytes.Buffer
	dir, err := PrepareDemo(&first)
	if err != nil {
		t.Fatal(err)
	}
	hubs := []string{"gptq 4-bit g64 sym", "awq gemm 4-bit g64", "compressed-tensors float-quantized float8 channel acts=fp8", "mlx 4-bit g64", "bnb nf4"}
	for _, s := range append([]string{"q8", "q6", "q4"}, hubs...) {
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
	var names, formats []string
	for _, v := range m.Variants {
		names = append(names, v.Name)
		if v.Kind == KindHub {
			formats = append(formats, v.Format)
		}
	}
	if m.Architecture != "LlamaForCausalLM" || strings.Join(names[:3], " ") != "q8 q6 q4" || !slices.Equal(slices.Sorted(slices.Values(formats)), slices.Sorted(slices.Values(hubs))) {
		t.Errorf("served as %s with variants %v (formats %v), want LlamaForCausalLM with q8 q6 q4 and %v", m.Architecture, names, formats, hubs)
	}
	// Their names (compressed-tensors' has an "=") are paths the server
	// serves.
	f := &fixture{}
	if f.srv, err = New(Options{Models: []*Model{m}, Logf: f.logf}); err != nil {
		t.Fatal(err)
	}
	var served int
	for _, fi := range m.Files {
		if !strings.HasPrefix(fi.Path, "hub/") {
			continue
		}
		if w := f.do(t, "/models/demo/"+fi.Path, nil); w.Code != 200 || w.Header().Get("ETag") != `"sha256-`+fi.SHA256+`"` {
			t.Errorf("%s: listed but served with %d, ETag %q", fi.Path, w.Code, w.Header().Get("ETag"))
		}
		served++
	}
	if served < 3*len(hubs) {
		t.Errorf("%d files listed under hub/, want at least config, tokenizer and weights of each of %d checkpoints", served, len(hubs))
	}
}
