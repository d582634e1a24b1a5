package snapshot

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func ExampleSpec_Query() {
	s := NewSpec()
	s.Prompt = "What is 2+2?"
	s.Stops = &[]int{}
	fmt.Println(s.Query().Encode())
	// Output:
	// device=auto&max_new=16&mode=greedy&model=demo&prompt=What+is+2%2B2%3F&ref=f32&stops=&test=q4
}

func TestQueryRoundTrip(t *testing.T) {
	for _, s := range []Spec{
		{Model: "demo", Ref: "f32", Test: "q4", Mode: Greedy, Prompt: "hi & bye", MaxNew: 8, Device: "gpu", Window: DefaultWindow},
		{Model: "m", Ref: "q8", Test: "q6", Mode: Greedy, Prompt: "x", MaxNew: 1, System: "Be brief.", Stops: &[]int{1, 2}, Device: "cpu", Window: DefaultWindow},
		{Model: "m", Ref: "f32", Test: "q4", Mode: Greedy, Prompt: "x", MaxNew: 3, Stops: &[]int{}, Device: "auto", Window: DefaultWindow},
		{Model: "demo", Ref: "f32", Test: "q8", Mode: Panel, Panel: "one\ntwo", Window: 5, Device: "auto", MaxNew: DefaultMaxNew},
		{Model: "demo", Ref: "f32", Test: "model-Q4_K_M.gguf", Mode: Greedy, Prompt: "x", MaxNew: 2, Device: "gpu", Window: DefaultWindow},
		{Model: "m", Ref: "f32", Test: "exl3-k4-mcg", Mode: Greedy, Prompt: "x", MaxNew: 2, Device: "gpu", Window: DefaultWindow},
		{Model: "demo", Ref: "hub/awq-4b-g64", Test: "hub/gptq 4-bit g128 (2)", Mode: Panel, Panel: "x y", Window: 4, Device: "cpu", MaxNew: DefaultMaxNew},
		{Model: "demo", Ref: "model-F16.GGUF", Test: "local:my copy (2).gguf", Mode: Panel, Panel: "x y", Window: 4, Device: "cpu", MaxNew: DefaultMaxNew},
		{Model: "local:Qwen3 0.6B (copy)/", Fingerprint: strings.Repeat("0f", 32), Ref: "f32", Test: "q4", Mode: Greedy, Prompt: "x", MaxNew: 2, Device: "gpu", Window: DefaultWindow},
		{Model: "local:m/", Ref: "m-Q4_K_M.gguf", Test: "local:other.gguf", Mode: Greedy, Prompt: "x", MaxNew: 2, Device: "cpu", Window: DefaultWindow},
		{Model: "demo", Ref: "q4", Test: "onnx/q4.onnx", Mode: Panel, Panel: "x y", Window: 4, Device: "gpu", MaxNew: DefaultMaxNew},
		{Model: "demo", Ref: "f32", Test: "onnx/my export.ONNX", Mode: Greedy, Prompt: "x", MaxNew: 2, Device: "cpu", Window: DefaultWindow},
	} {
		q, err := url.ParseQuery(s.Query().Encode())
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
		}
	}
}

func TestSpecErrors(t *testing.T) {
	for _, c := range []struct{ query, want string }{
		{"max_new=ten&prompt=x", `max_new="ten": not an integer`},
		{"stops=1,x&prompt=x", `stops="1,x": "x" is not a token id`},
		{"ref=q3&prompt=x", `ref "q3": want one of f32, q8, q6, q4, a .gguf file of the model, hub/DIR or local:FILE.gguf`},
		{"test=hub/&prompt=x", `test "hub/": a hub checkpoint is named hub/DIR, DIR a plain directory name`},
		{"test=hub/../x&prompt=x", `a hub checkpoint is named hub/DIR`},
		{"test=hub/a/b&prompt=x", `a hub checkpoint is named hub/DIR`},
		{"test=hub/.x&prompt=x", `a hub checkpoint is named hub/DIR`},
		{"test=hub/a%0Ab&prompt=x", `a hub checkpoint is named hub/DIR`},
		{"test=exl3-k4&prompt=x", `test "exl3-k4": an EXL3 variant is named exl3-k4-mcg`},
		{"test=exl3-k9-mcg&prompt=x", `test "exl3-k9-mcg": exl3: format "exl3-k9-mcg": "9" bits per weight: want 1 to 8`},
		{"test=local:&prompt=x", `test "local:": choose a local GGUF file`},
		{"test=local:x.bin&prompt=x", `test "local:x.bin": want one of`},
		{"test=../x.gguf&prompt=x", `test "../x.gguf": a GGUF file is named by a plain file name`},
		{"test=sub/x.gguf&prompt=x", `a plain file name`},
		{"test=.hidden.gguf&prompt=x", `a plain file name`},
		{"test=local:a%0Ab.gguf&prompt=x", `a plain file name`},
		{"test=bf16&prompt=x", `test "bf16"`},
		{"test=onnx/&prompt=x", `test "onnx/": an ONNX export is named onnx/NAME.onnx`},
		{"test=onnx/q4.gguf&prompt=x", `an ONNX export is named`},
		{"test=onnx/../q4.onnx&prompt=x", `an ONNX export is named`},
		{"test=onnx/.q4.onnx&prompt=x", `an ONNX export is named`},
		{"ref=onnx/a%0Ab.onnx&prompt=x", `ref "onnx/a\nb.onnx": an ONNX export is named`},
		{"device=tpu&prompt=x", `device "tpu"`},
		{"model=&prompt=x", `model "": empty`},
		{"model=local:&prompt=x", `model "local:": choose a model folder from this computer`},
		{"model=local:m&prompt=x", `model "local:m": a model folder is named local:NAME/`},
		{"model=local:a/b/&prompt=x", `a plain folder name`},
		{"model=local:.cache/&prompt=x", `a plain folder name`},
		{"model=demo&fp=" + strings.Repeat("a", 64) + "&prompt=x", `model "demo": a fingerprint names a local folder's checkpoint`},
		{"model=local:m/&fp=ABC&prompt=x", `fingerprint "ABC": want 64 lowercase hex digits`},
		{"mode=chat&prompt=x", `mode "chat"`},
		{"", "prompt: empty"},
		{"prompt=x&max_new=0", "max_new 0"},
		{"mode=panel&panel=+", "panel: empty text"},
		{"mode=panel&panel=abc&window=1", "window 1"},
	} {
		q, _ := url.ParseQuery(c.query)
		s, err := ParseQuery(q)
		if err == nil {
			err = s.Check()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.query, err, c.want)
		}
	}
}

// A run's spec is its link's: the other mode's text is not recorded.
func TestLinked(t *testing.T) {
	s := NewSpec()
	s.Prompt, s.Panel, s.System, s.MaxNew = "Why?", "Some text.", "Be brief.", 5
	stops := []int{1, 2}
	s.Stops = &stops
	g := s.Linked()
	if g.Panel != "" || g.Prompt != "Why?" || g.System != "Be brief." || g.MaxNew != 5 || g.Stops == nil || len(*g.Stops) != 2 || g.Window != DefaultWindow {
		t.Errorf("greedy: %+v", g)
	}
	s.Mode, s.Window = Panel, 32
	p := s.Linked()
	if p.Prompt != "" || p.System != "" || p.MaxNew != DefaultMaxNew || p.Stops != nil || p.Panel != "Some text." || p.Window != 32 {
		t.Errorf("panel: %+v", p)
	}
}
