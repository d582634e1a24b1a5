package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/receipt"
	"logitscope/internal/peer/llamacpp"
)

func exportCmd(args []string, out, errb *bytes.Buffer) error { return export(args, out, errb) }

// ggufModel exports the tiny model as F32 GGUF with the export command,
// and sends the derived files of the models opened from it to a cache of
// the test's own.
func ggufModel(t *testing.T) string {
	t.Helper()
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	path := filepath.Join(t.TempDir(), "tiny-f32.gguf")
	if _, err := run(t, exportCmd, "--model", tiny(t), "--gguf", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// A GGUF file opened as the model (--model F.gguf) computes the very
// logits that the same file gives as a variant of the checkpoint it came
// from (--model DIR --variant F.gguf), greedy and on a panel: the derived
// config, tokenizer and chat template are the checkpoint's. Its receipt
// fingerprints the model as the file's sha256 and records the file's
// type mix, which report shows.
func TestCaptureGGUFModel(t *testing.T) {
	path := ggufModel(t)
	sum, err := checkpoint.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	hfSum, err := ck.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"greedy", []string{"--max-new", "6", "Hello"}},
		{"panel", []string{"--panel", "../../internal/model/synth/corpus.txt", "--window", "32"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			own, asVariant := filepath.Join(dir, "own.dump"), filepath.Join(dir, "variant.dump")
			common := []string{"--device", "cpu", "--runtime", "native"}
			outOwn, err := run(t, captureCmd, append(append([]string{"--model", path, "--dump-logits", own}, common...), c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			outVariant, err := run(t, captureCmd, append(append([]string{"--model", tiny(t), "--variant", path, "--dump-logits", asVariant}, common...), c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			a, b := fileSHA(t, own), fileSHA(t, asVariant)
			if a != b {
				t.Fatalf("the GGUF model's logits differ from the GGUF variant's (dump sha256 %s and %s)", a, b)
			}
			cut := func(s string) string { return s[strings.Index(s, "logit_rows_dumped"):] }
			if strings.ReplaceAll(cut(outOwn), own, "") != strings.ReplaceAll(cut(outVariant), asVariant, "") {
				t.Errorf("outputs differ:\n%s\n%s", outOwn, outVariant)
			}
			ro, err := receipt.Read(receipt.Path(own))
			if err != nil {
				t.Fatal(err)
			}
			rv, err := receipt.Read(receipt.Path(asVariant))
			if err != nil {
				t.Fatal(err)
			}
			if ro.Model != sum || ro.GGUF == nil || ro.GGUF.SHA256 != sum || ro.Variant != "tiny-f32.gguf" || ro.GGUF.Types["F32"] == 0 {
				t.Errorf("the GGUF model's receipt: model %s, variant %q, gguf %+v; want the file's sha256 %s", ro.Model, ro.Variant, ro.GGUF, sum)
			}
			if rv.Model != hfSum || rv.GGUF == nil || rv.GGUF.SHA256 != sum {
				t.Errorf("the GGUF variant's receipt: model %s, gguf %+v", rv.Model, rv.GGUF)
			}
			rep, err := run(t, reportCmd, "--ref", asVariant, "--test", own)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(rep, "[GGUF: F32") || !strings.Contains(rep, "same checkpoint: no") {
				t.Errorf("report:\n%s", rep)
			}
		})
	}
	plan, err := run(t, captureCmd, "--model", path, "--dry-run", "--dump-logits", filepath.Join(t.TempDir(), "x.dump"), "Hi")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(plan), &p); err != nil || p["model"] != path || p["variant"] != "tiny-f32.gguf" || p["architecture"] != "Qwen2ForCausalLM" {
		t.Fatalf("plan %s: %v", plan, err)
	}
}

// tokenize --model F.gguf encodes with the tokenizer its metadata
// describes, as the checkpoint's own does, chat template included.
func TestTokenizeGGUFModel(t *testing.T) {
	path := ggufModel(t)
	in := `"Hello, world: 12345 café"` + "\n" + `{"text": "<|im_start|>user\nHi<|im_end|>"}` + "\n"
	for _, chat := range []bool{false, true} {
		var outs []string
		for _, model := range []string{tiny(t), path} {
			args := []string{"--model", model}
			if chat {
				args = append(args, "--chat", "--system", "Be brief.")
			}
			var out, errb bytes.Buffer
			if err := tokenizeFrom(strings.NewReader(in), args, &out, &errb); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, out.String())
		}
		if outs[0] != outs[1] || strings.Count(outs[0], "\n") != 2 {
			t.Errorf("chat %v: the GGUF model's ids\n%s the checkpoint's\n%s", chat, outs[1], outs[0])
		}
	}
}

// What a GGUF model cannot do is refused, saying why and what to do
// instead: quantizing it or asking for a scheme variant of it (quantize
// the Hugging Face checkpoint), exporting it again, running it in
// engine.wasm.
func TestGGUFModelRefusals(t *testing.T) {
	path := ggufModel(t)
	dump := filepath.Join(t.TempDir(), "x.dump")
	for _, c := range []struct {
		name string
		cmd  func([]string, *bytes.Buffer, *bytes.Buffer) error
		args []string
		want []string
	}{
		{"quantize", quantizeCmd, []string{"--model", path, "--scheme", "q4"}, []string{path, "is a GGUF file", "quantize the checkpoint it was converted from"}},
		{"scheme variant", captureCmd, []string{"--model", path, "--variant", "q4", "--device", "cpu", "--dump-logits", dump, "Hi"},
			[]string{"variant q4", path, "is a GGUF file", "quantize the checkpoint it was converted from", "--variant OTHER.gguf"}},
		{"variant directory", captureCmd, []string{"--model", path, "--variant", t.TempDir(), "--device", "cpu", "--dump-logits", dump, "Hi"},
			[]string{path, "is a GGUF file"}},
		{"wasm", captureCmd, []string{"--model", path, "--runtime", "wasm", "--device", "cpu", "--dump-logits", dump, "Hi"},
			[]string{path, "engine.wasm does not read GGUF files"}},
		{"export", exportCmd, []string{"--model", path, "--gguf", filepath.Join(t.TempDir(), "again.gguf")}, []string{path, "is a GGUF file already"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, c.cmd, c.args...)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(dump); err == nil {
				t.Error("a dump was written")
			}
		})
	}
}

// export --type refuses what llama-quantize would not take, before
// writing anything: a type it does not know (listing those it does) and
// a variant to quantize again.
func TestExportTypeRefusals(t *testing.T) {
	llamacpp.Harness(t)
	out := filepath.Join(t.TempDir(), "x.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--type", "Q4_K_X"}, `llama.cpp has no file type "Q4_K_X": it has F32, F16, BF16, Q4_0`},
		{[]string{"--type", "Q4_K_M", "--variant", "q8"}, "--type Q4_K_M quantizes the checkpoint's own weights: it takes --variant f32, not q8"},
		{[]string{"--tensor-type", "attn_v=q8_0"}, "--tensor-type is a rule of llama.cpp's quantizer: give --type too"},
		{[]string{"--type", "Q4_0", "--tensor-type", "attn_v"}, `--tensor-type "attn_v": want REGEX=TYPE`},
		{[]string{"--type", "Q4_0", "--tensor-type", "attn_v=q9_9"}, "unknown ggml type q9_9"},
	} {
		_, err := run(t, exportCmd, append(c.args, "--model", tiny(t), "--gguf", out)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: %s written", c.args, out)
		}
	}
}
