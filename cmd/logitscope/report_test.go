package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/quant/variant"
	"logitscope/internal/text/tokenizer"
)

func quantizeCmd(args []string, out, errb *bytes.Buffer) error { return quantize(args, out, errb) }
func reportCmd(args []string, out, errb *bytes.Buffer) error   { return report(args, out, errb) }

// quantized copies the tiny model and writes its q8, q6 and q4 variants.
func quantized(t *testing.T) string {
	dir := copyModel(t)
	for _, s := range []string{"q8", "q6", "q4"} {
		if _, err := run(t, quantizeCmd, "--model", dir, "--scheme", s); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func panelFile(t *testing.T) string {
	corpus, err := os.ReadFile("../../internal/model/synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "panel.txt")
	os.WriteFile(path, corpus, 0o644)
	return path
}

type reportOut struct {
	Provenance *receipt.Provenance `json:"provenance"`
	Summary    struct {
		Positions  int `json:"positions"`
		Flips      int `json:"flips"`
		CloseFlips int `json:"close_flips"`
		ClearFlips int `json:"clear_flips"`
		KLD        struct {
			Value float64 `json:"value"`
		} `json:"kld_mean"`
		PPL *struct{} `json:"ppl"`
	} `json:"summary"`
}

// On the tiny preset, mean KLD against f32 grows from q8 to q6 to q4, and
// the reports show close and clear flips.
func TestReportSchemes(t *testing.T) {
	dir := quantized(t)
	panel := panelFile(t)
	out := t.TempDir()
	for _, v := range []string{"f32", "q8", "q6", "q4"} {
		got, err := run(t, captureCmd, "--model", dir, "--variant", v, "--panel", panel, "--window", "64",
			"--dump-logits", filepath.Join(out, v+".dump"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, "panel_windows: 18\n") {
			t.Fatalf("%s:\n%s", v, got)
		}
	}
	var klds []float64
	var close, clear int
	for _, v := range []string{"q8", "q6", "q4"} {
		got, err := run(t, reportCmd, "--ref", filepath.Join(out, "f32.dump"), "--test", filepath.Join(out, v+".dump"), "--json")
		if err != nil {
			t.Fatal(err)
		}
		var r reportOut
		if err := json.Unmarshal([]byte(got), &r); err != nil {
			t.Fatal(err)
		}
		s := r.Summary
		t.Logf("%s: mean KLD %.6f, %d flips (%d close, %d clear) of %d positions", v, s.KLD.Value, s.Flips, s.CloseFlips, s.ClearFlips, s.Positions)
		if r.Provenance == nil || !r.Provenance.SameModel || !r.Provenance.SameSequence || s.PPL == nil {
			t.Fatalf("%s: provenance %+v, ppl %v", v, r.Provenance, s.PPL)
		}
		klds = append(klds, s.KLD.Value)
		close += s.CloseFlips
		clear += s.ClearFlips
	}
	if !(0 < klds[0] && klds[0] < klds[1] && klds[1] < klds[2]) {
		t.Errorf("mean KLD q8 %g, q6 %g, q4 %g: not increasing", klds[0], klds[1], klds[2])
	}
	if close == 0 || clear == 0 {
		t.Errorf("%d close and %d clear flips: the report must show both", close, clear)
	}
	text, err := run(t, reportCmd, "--ref", filepath.Join(out, "f32.dump"), "--test", filepath.Join(out, "q4.dump"),
		"--tokenizer", filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"same checkpoint: yes; same token sequence: yes", "Mean PPL(Q)", "Mean    KLD", "clear", "close"} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
}

// The receipts of a greedy capture say which variant and request made the
// dump; a dry run prints the plan and writes nothing.
func TestCaptureReceiptAndDryRun(t *testing.T) {
	dir := quantized(t)
	path := filepath.Join(t.TempDir(), "q.dump")
	plan, err := run(t, captureCmd, "--model", dir, "--variant", "q6", "--dry-run", "--dump-logits", path, "Hi")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(plan), &p); err != nil || p["variant"] != "q6" || p["request"] == nil {
		t.Fatalf("plan %s: %v", plan, err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a dry run wrote a dump")
	}
	if _, err := run(t, captureCmd, "--model", dir, "--variant", "q6", "--max-new", "3", "--dump-logits", path, "Hi"); err != nil {
		t.Fatal(err)
	}
	r, err := receipt.Read(receipt.Path(path))
	if err != nil {
		t.Fatal(err)
	}
	if r.Variant != "q6" || r.VariantManifest == "" || r.Request.Mode != "greedy" || len(r.Request.PromptIDs) == 0 ||
		r.Request.MaxNew != 3 || len(r.OutputIDs) != r.Dump.Rows || r.Dump.Vocab != 512 {
		t.Fatalf("receipt %+v", r)
	}
	if err := r.CheckDump(path); err != nil {
		t.Fatal(err)
	}
}

// policyShown captures dir's f32 reference and its q4 variant following
// it: the variant's receipt records policy, and the report's header names
// it beside the scheme.
func policyShown(t *testing.T, dir, policy string) {
	t.Helper()
	ref, test := filepath.Join(t.TempDir(), "ref.dump"), filepath.Join(t.TempDir(), "test.dump")
	if _, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--max-new", "3", "--dump-logits", ref, "Hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, captureCmd, "--model", dir, "--variant", "q4", "--device", "cpu", "--follow", ref, "--dump-logits", test); err != nil {
		t.Fatal(err)
	}
	r, err := receipt.Read(receipt.Path(test))
	if err != nil {
		t.Fatal(err)
	}
	if r.VariantPolicy != policy {
		t.Fatalf("receipt policy %q, want %q", r.VariantPolicy, policy)
	}
	text, err := run(t, reportCmd, "--ref", ref, "--test", test)
	if err != nil || !strings.Contains(text, "(q4 "+policy+", forced") {
		t.Fatalf("report does not name the policy: %v\n%s", err, text)
	}
}

// quantize --only/--keep quantizes the matrices the policy picks; the
// receipt of a capture on that variant and the report of it name the
// policy, and a policy that picks nothing is an error.
func TestQuantizePolicy(t *testing.T) {
	dir := copyModel(t)
	out, err := run(t, quantizeCmd, "--model", dir, "--scheme", "q4", "--only", `mlp\.`, "--keep", `down_proj`)
	if err != nil || !strings.Contains(out, "wrote q4 variant: 4 tensors in q4") {
		t.Fatalf("quantize: %q, %v", out, err)
	}
	policyShown(t, dir, `--only "mlp\\." --keep "down_proj"`)
	if _, err := run(t, quantizeCmd, "--model", dir, "--scheme", "q8", "--only", "no_such_tensor"); err == nil || !strings.Contains(err.Error(), "picks no matrix") {
		t.Fatalf("a policy that picks nothing: %v", err)
	}
	if _, err := os.Stat(variant.DefaultDir(dir, "q8")); err == nil {
		t.Fatal("a policy that picks nothing wrote a variant")
	}
}

// quantize --as REGEX=SCHEME gives the matrices a rule matches its scheme,
// before --keep and --scheme; quantize counts the tensors per scheme, notes
// a rule that decides nothing, and the receipt and the report name the
// rules. A bad --as value is refused naming it, before anything is written.
func TestQuantizeRules(t *testing.T) {
	dir := copyModel(t)
	var out, errb bytes.Buffer
	// tiny ties its head to the embedding: there is no lm_head to match.
	err := quantize([]string{"--model", dir, "--scheme", "q4", "--keep", `embed_tokens|self_attn`,
		"--as", `self_attn\.[qk]_proj=q8`, "--as", `down_proj=q6`, "--as", `lm_head=f32`}, &out, &errb)
	const counts = "wrote q4 variant: 4 tensors in q4, 4 in q8, 2 in q6, 5 matrices kept in f32, "
	if err != nil || !strings.Contains(out.String(), counts) {
		t.Fatalf("quantize: %q, %v; want %q", out.String(), err, counts)
	}
	if note := `quantize: note: --as "lm_head=f32" decides no matrix`; !strings.Contains(errb.String(), note) || strings.Count(errb.String(), "note:") != 1 {
		t.Fatalf("stderr %q, want one note %q", errb.String(), note)
	}
	v, err := variant.Open(variant.DefaultDir(dir, "q4"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"model.layers.0.self_attn.q_proj.weight": "q8",
		"model.layers.1.self_attn.k_proj.weight": "q8",
		"model.layers.0.self_attn.v_proj.weight": "f32", // no rule: --keep
		"model.layers.1.mlp.down_proj.weight":    "q6",
		"model.layers.1.mlp.up_proj.weight":      "q4",
		"model.embed_tokens.weight":              "f32",
	} {
		if got := v.Pieces(name)[0].Scheme; got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}

	policyShown(t, dir, `--keep "embed_tokens|self_attn" --as "self_attn\\.[qk]_proj=q8" --as "down_proj=q6" --as "lm_head=f32"`)

	for _, c := range []struct{ as, want string }{
		{`self_attn`, `invalid value "self_attn" for flag -as: want REGEX=SCHEME, e.g. 'self_attn\.=q8'`},
		{`self_attn=q3`, `invalid value "self_attn=q3" for flag -as: scheme "q3": want q8, q6, q4, exl3-kK[-CODEBOOK] or f32`},
		{`self_attn(=q8`, `invalid value "self_attn(=q8" for flag -as: error parsing regexp: missing closing ): ` + "`self_attn(`"},
		{`=q8`, `invalid value "=q8" for flag -as: empty regexp (use --scheme for every matrix)`},
	} {
		_, err := run(t, quantizeCmd, "--model", dir, "--scheme", "q8", "--as", `mlp=q4`, "--as", c.as)
		if err == nil || err.Error() != c.want+" (logitscope quantize -h lists its flags)" {
			t.Errorf("--as %s: %v, want %q", c.as, err, c.want)
		}
	}
	// Rules that store every matrix in f32 leave nothing to quantize.
	if _, err := run(t, quantizeCmd, "--model", dir, "--scheme", "q8", "--as", `.=f32`); err == nil || !strings.Contains(err.Error(), "picks no matrix") {
		t.Fatalf("rules that quantize nothing: %v", err)
	}
	if _, err := os.Stat(variant.DefaultDir(dir, "q8")); err == nil {
		t.Fatal("a refused quantize wrote a variant")
	}
}

// Bad input to report: a clear error naming the file, nothing printed.
func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rows, vocab int) string {
		p := filepath.Join(dir, name)
		if err := dump.WriteFile(p, &dump.Logits{Rows: rows, Vocab: vocab, Data: make([]float32, rows*vocab)}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, other := write("a.dump", 2, 8), write("b.dump", 2, 9)
	trunc := write("t.dump", 2, 8)
	b, _ := os.ReadFile(trunc)
	os.WriteFile(trunc, b[:len(b)-3], 0o644)
	// A binary dump is hashed as it is compared, a safetensors one before.
	forged, forgedST := write("f.dump", 2, 8), write("f.safetensors", 2, 8)
	for _, p := range []string{forged, forgedST} {
		receipt.Write(receipt.Path(p), &receipt.Receipt{Dump: receipt.Dump{SHA256: "00", Rows: 2, Vocab: 8}})
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"other vocabulary", []string{"--ref", a, "--test", other}, "a.dump is 2 rows × 8 vocab, " + other + " is 2 rows × 9 vocab"},
		{"truncated", []string{"--ref", a, "--test", trunc}, "t.dump: truncated dump"},
		{"receipt of another dump", []string{"--ref", a, "--test", forged}, "f.dump: sha256"},
		{"receipt of another safetensors dump", []string{"--ref", forgedST, "--test", a}, "f.safetensors: sha256"},
		{"missing", []string{"--ref", a, "--test", filepath.Join(dir, "nope.dump")}, "nope.dump"},
		{"bad k", []string{"--ref", a, "--test", a, "--close-margin", "0"}, "--close-margin 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, reportCmd, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) || out != "" {
				t.Fatalf("err = %v, out %q; want %q", err, out, c.want)
			}
		})
	}
}

// --follow feeds the reference's tokens back: following an f32 greedy
// capture with f32 reproduces its dump bit for bit (teacher forcing equals
// KV-cache decoding), and a q4 capture that follows it lines up row by row.
func TestCaptureFollow(t *testing.T) {
	dir := quantized(t)
	out := t.TempDir()
	ref := filepath.Join(out, "ref.dump")
	if _, err := run(t, captureCmd, "--model", dir, "--max-new", "12", "--dump-logits", ref, "What is the capital of France?"); err != nil {
		t.Fatal(err)
	}
	same := filepath.Join(out, "same.dump")
	got, err := run(t, captureCmd, "--model", dir, "--follow", ref, "--dump-logits", same)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "first_disagreement: -1\n") {
		t.Fatalf("f32 following itself disagreed:\n%s", got)
	}
	if fileSHA(t, ref) != fileSHA(t, same) {
		t.Fatal("teacher-forced rows differ from the greedy capture's rows")
	}
	q4 := filepath.Join(out, "q4.dump")
	if got, err = run(t, captureCmd, "--model", dir, "--variant", "q4", "--follow", ref, "--dump-logits", q4); err != nil {
		t.Fatal(err)
	}
	rep, err := run(t, reportCmd, "--ref", ref, "--test", q4)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep, "same checkpoint: yes; same token sequence: yes") || !strings.Contains(got, "argmax_ids: [") {
		t.Fatalf("capture:\n%s\nreport:\n%s", got, rep)
	}
	if _, err := run(t, captureCmd, "--model", dir, "--follow", filepath.Join(out, "nope.dump"), "--dump-logits", q4); err == nil {
		t.Fatal("--follow of a missing dump succeeded")
	}
}

// A dump without a receipt beside it is still compared, but report says on
// stderr, in the text and in the JSON that its provenance cannot be
// checked; a dump with its receipt gets no such note.
func TestReportMissingReceipt(t *testing.T) {
	dir := t.TempDir()
	bare, sealed := filepath.Join(dir, "bare.dump"), filepath.Join(dir, "sealed.dump")
	for _, p := range []string{bare, sealed} {
		if err := dump.WriteFile(p, &dump.Logits{Rows: 2, Vocab: 8, Data: make([]float32, 16)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := receipt.Write(receipt.Path(sealed), &receipt.Receipt{Request: receipt.Request{Mode: "greedy"},
		Dump: receipt.Dump{SHA256: fileSHA(t, sealed), Rows: 2, Vocab: 8}}); err != nil {
		t.Fatal(err)
	}
	note := bare + " has no receipt: its provenance cannot be checked"
	for _, asJSON := range []bool{false, true} {
		args := []string{"--ref", bare, "--test", sealed}
		if asJSON {
			args = append(args, "--json")
		}
		var out, errb bytes.Buffer
		if err := report(args, &out, &errb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errb.String(), "note: "+note) || strings.Contains(errb.String(), "sealed.dump has no receipt") {
			t.Errorf("json %v: stderr %q, want only the note %q", asJSON, errb.String(), note)
		}
		if !asJSON {
			if !strings.Contains(out.String(), "note: "+note+"\n") || strings.Contains(out.String(), "sealed.dump has no receipt") {
				t.Errorf("the text report lacks the note %q:\n%s", note, out.String())
			}
			continue
		}
		var got struct{ Notes []string }
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Notes) != 1 || got.Notes[0] != note {
			t.Errorf("JSON notes %q, want [%q]", got.Notes, note)
		}
	}
}

// --flips N lists N flips and counts the rest; 0 lists none, only the
// count, where it once meant the default.
func TestReportFlipsListed(t *testing.T) {
	dir := t.TempDir()
	ref, test := filepath.Join(dir, "ref.dump"), filepath.Join(dir, "test.dump")
	// Every one of 12 rows flips: the reference prefers token 0, the test 1.
	r, q := &dump.Logits{Rows: 12, Vocab: 4}, &dump.Logits{Rows: 12, Vocab: 4}
	for range 12 {
		r.Data = append(r.Data, 2, 1, 0, 0)
		q.Data = append(q.Data, 1, 2, 0, 0)
	}
	if err := dump.WriteFile(ref, r); err != nil {
		t.Fatal(err)
	}
	if err := dump.WriteFile(test, q); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flips  string
		listed int
		more   string
	}{{"", 10, "… and 2 more flips"}, {"3", 3, "… and 9 more flips"}, {"0", 0, "… and 12 more flips"}} {
		args := []string{"--ref", ref, "--test", test}
		if c.flips != "" {
			args = append(args, "--flips", c.flips)
		}
		var out, errb bytes.Buffer
		if err := report(args, &out, &errb); err != nil {
			t.Fatal(err)
		}
		listed := strings.Count(out.String(), " clear\n") + strings.Count(out.String(), " close\n")
		if listed != c.listed || !strings.Contains(out.String(), c.more) {
			t.Errorf("--flips %q: %d flips listed, want %d and %q:\n%s", c.flips, listed, c.listed, c.more, out.String())
		}
	}
	if err := report([]string{"--ref", ref, "--test", test, "--flips", "-1"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--flips -1") {
		t.Errorf("--flips -1: %v", err)
	}
}

// report --tokenizer names a byte token as the page does, <0xF1>, not
// "�", which every high byte would read as.
func TestReportByteTokens(t *testing.T) {
	tokPath := filepath.Join(tiny(t), "tokenizer.json")
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	byteID := -1
	for id := range tok.VocabSize() {
		if tok.Piece(id) == "<0xF1>" {
			byteID = id
		}
	}
	if byteID < 0 {
		t.Fatal("the tiny tokenizer has no token <0xF1>")
	}
	dir := t.TempDir()
	ref, test := filepath.Join(dir, "ref.dump"), filepath.Join(dir, "test.dump")
	r, q := &dump.Logits{Rows: 1, Vocab: tok.VocabSize(), Data: make([]float32, tok.VocabSize())}, &dump.Logits{Rows: 1, Vocab: tok.VocabSize(), Data: make([]float32, tok.VocabSize())}
	r.Data[byteID], q.Data[(byteID+1)%tok.VocabSize()] = 5, 5
	if err := dump.WriteFile(ref, r); err != nil {
		t.Fatal(err)
	}
	if err := dump.WriteFile(test, q); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := report([]string{"--ref", ref, "--test", test, "--tokenizer", tokPath}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "<0xF1>") || strings.Contains(out.String(), "�") {
		t.Fatalf("the report names the byte token otherwise:\n%s", out.String())
	}
}
