package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/chain/chaintest"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/format/routing"
)

// pair is a 3-row, 16-token reference and a test that agrees on row 0,
// flips row 1 on a near tie under noise everywhere (close) and row 2
// against a clear preference with no other noise (clear).
func pair() (ref, test *dump.Logits) {
	const v = 16
	ref = &dump.Logits{Rows: 3, Vocab: v, Data: make([]float32, 3*v)}
	test = &dump.Logits{Rows: 3, Vocab: v, Data: make([]float32, 3*v)}
	r, t := ref.Data, test.Data
	r[0], t[0] = 5, 5
	r[v], r[v+1] = 2, 1.99
	for i := range v {
		t[v+i] = r[v+i] + 0.1*float32(2*(i%2)-1) // d = ∓0.1: σ ≈ 0.14 ≫ m = 0.01
	}
	r[2*v], r[2*v+1] = 3, 2
	t[2*v], t[2*v+1] = 2.4, 2.6 // m = 1, σ = 0.3
	return ref, test
}

// moePair is pair with routes (sparse layers 1 and 3, top-2 of 4
// experts): row 0 routed alike, row 1 reordered at layer 3, row 2 to
// another expert at layer 1.
func moePair() (ref, test *dump.Logits) {
	ref, test = pair()
	l := routing.Layout{Layers: []int{1, 3}, TopK: 2, Experts: 4}
	ref.Routes = &routing.Routes{Layout: l, Rows: 3, IDs: []int32{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}}
	test.Routes = &routing.Routes{Layout: l, Rows: 3, IDs: []int32{0, 1, 2, 3, 0, 1, 3, 2, 0, 2, 2, 3}}
	return ref, test
}

func text(id int) string { return string(rune('a' + id)) }

func TestBuild(t *testing.T) {
	ref, test := pair()
	d, err := Build(nil, Capture{Side: Side{Label: "f32"}, Logits: ref, PromptIDs: []int{3}, Output: []int{0, 0, 0}},
		Capture{Side: Side{Label: "q4"}, Logits: test}, nil, text)
	if err != nil {
		t.Fatal(err)
	}
	if d.Ref.Rows != 3 || d.Test.Rows != 3 || d.Ref.Label != "f32" {
		t.Errorf("sides %+v %+v", d.Ref, d.Test)
	}
	if got := d.Report.Summary; got.Flips != 2 || got.ClearFlips != 1 || got.CloseFlips != 1 {
		t.Errorf("summary: %d flips, %d clear", got.Flips, got.ClearFlips)
	}
	if d.Text(1) != "b" || d.Text(99) != "#99" || d.Texts["3"] != "d" {
		t.Errorf("texts %v", d.Texts)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Report.Positions[2].Class != d.Report.Positions[2].Class || back.Tokens[1] != 0 {
		t.Errorf("round trip lost the view: %+v", back.Report.Positions[2])
	}
}

func TestParseErrors(t *testing.T) {
	ref, test := pair()
	d, err := Build(nil, Capture{Logits: ref}, Capture{Logits: test}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(d)
	for _, c := range []struct{ from, to, want string }{
		{`"kind":"logitscope.snapshot"`, `"kind":"x"`, `kind "x"`},
		{`"version":1`, `"version":2`, "version 2"},
		{`"tokens":[0,0,0]`, `"tokens":[0]`, "3 rows, 3 positions and 1 tokens"},
		{`"report":{`, `"report":null,"x":{`, "no report"},
		{`{`, `[`, "snapshot: invalid"},
	} {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("%q not in the document", c.from)
		}
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: got %v, want %q", c.from, c.to, err, c.want)
		}
	}
}

func dumpBytes(t *testing.T, l *dump.Logits) []byte {
	var b bytes.Buffer
	if err := dump.Write(&b, l); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sealed(t *testing.T, r *receipt.Receipt) []byte {
	data, err := receipt.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestOffline(t *testing.T) {
	ref, test := pair()
	refData, testData := dumpBytes(t, ref), dumpBytes(t, test)
	sum := sha256.Sum256(refData)
	rc := sealed(t, &receipt.Receipt{Variant: "f32", Device: "cpu", Request: receipt.Request{Mode: "panel"},
		Targets: []int{1, 1, 0}, Dump: receipt.Dump{SHA256: hex.EncodeToString(sum[:]), Rows: 3, Vocab: 4}})

	d, err := Offline(dropped("ref.dump", refData, rc), dropped("q.dump", testData, nil),
		func(vocab int) func(int) string {
			if vocab != 16 {
				t.Errorf("textFor got vocab %d, want 16", vocab)
			}
			return text
		})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Report.Summary.TeacherForced || d.Tokens[0] != 1 || d.Ref.Device != "cpu" || d.Spec != nil {
		t.Errorf("targets from the receipt not used: %+v %v", d.Report.Summary, d.Tokens)
	}

	// A GGUF capture's receipt names its file and type mix: the document
	// carries them for the header, and parses back.
	tsum := sha256.Sum256(testData)
	grc := sealed(t, &receipt.Receipt{Variant: "m-Q4_K_M.gguf", Device: "cpu", Request: receipt.Request{Mode: "panel"},
		GGUF:    &receipt.GGUF{SHA256: strings.Repeat("ab", 32), Types: map[string]int{"Q4_K": 9, "Q6_K": 2, "F32": 5}},
		Targets: []int{1, 1, 0}, Dump: receipt.Dump{SHA256: hex.EncodeToString(tsum[:]), Rows: 3, Vocab: 4}})
	d, err = Offline(dropped("ref.dump", refData, rc), dropped("q.dump", testData, grc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := d.Test.GGUF; g == nil || g.Name != "m-Q4_K_M.gguf" || g.SHA256 != strings.Repeat("ab", 32) || g.Types["Q4_K"] != 9 || d.Ref.GGUF != nil {
		t.Fatalf("GGUF sides %+v, %+v", d.Ref.GGUF, d.Test.GGUF)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("a document with a GGUF side: %v", err)
	}

	for _, c := range []struct {
		name      string
		ref, test Dropped
		want      string
	}{
		{"receipt of another dump", dropped("ref.dump", testData, rc), dropped("q.dump", testData, nil), "ref.dump: sha256"},
		{"truncated", dropped("ref.dump", refData[:30], nil), dropped("q.dump", testData, nil), "ref.dump"},
		{"geometry", dropped("ref.dump", refData, nil), dropped("q.dump", dumpBytes(t, &dump.Logits{Rows: 1, Vocab: 4, Data: make([]float32, 4)}), nil), "not the same geometry"},
		{"forged receipt", dropped("ref.dump", refData, bytes.Replace(rc, []byte(`"cpu"`), []byte(`"gpu"`), 1)), dropped("q.dump", testData, nil), "sealed"},
	} {
		if _, err := Offline(c.ref, c.test, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// Two dropped safetensors dumps of a mixture of experts carry their
// routes into the document; dropped as binary dumps they carry none.
func TestOfflineRoutes(t *testing.T) {
	ref, test := moePair()
	dir := t.TempDir()
	drop := func(name string, l *dump.Logits) Dropped {
		path := filepath.Join(dir, name)
		if err := dump.WriteFile(path, l); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return dropped(name, data, nil)
	}
	d, err := Offline(drop("ref.safetensors", ref), drop("q4.safetensors", test), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rt := d.Report.Routing; rt == nil || rt.Summary.SetChanged != 1 || rt.Summary.FirstSetChange != 2 {
		t.Fatalf("routing %+v", d.Report.Routing)
	}
	d, err = Offline(drop("ref.dump", ref), drop("q4.dump", test), nil)
	if err != nil || d.Report.Routing != nil {
		t.Fatalf("binary dumps: routing %v, %v", d.Report.Routing, err)
	}
}

// dropped is a dropped dump of data, with its receipt rc (nil: none).
func dropped(name string, data, rc []byte) Dropped {
	return Dropped{Name: name, File: bytes.NewReader(data), Size: int64(len(data)), Receipt: rc}
}

// Two dropped dumps whose receipts bind a panel with domains and roles
// give a document broken down by them, as report prints it; dumps of two
// different panels are refused.
func TestOfflineBreakdown(t *testing.T) {
	ref, test := pair()
	refData, testData := dumpBytes(t, ref), dumpBytes(t, test)
	panel := func(second string) *chain.Panel {
		return &chain.Panel{Windows: []chain.PanelWindow{
			{WindowID: "a", Domain: "code", Role: "eval", Tokens: 2, PredictionPositions: 1},
			{WindowID: "b", Domain: second, Role: "eval", Tokens: 3, PredictionPositions: 2},
		}}
	}
	receiptOf := func(data []byte, p *chain.Panel) []byte {
		sum := sha256.Sum256(data)
		ch := chaintest.Chain(t, p)
		return sealed(t, &receipt.Receipt{Variant: "f32", Device: "cpu", Model: ch.Checkpoint.Model, Chain: ch,
			Request: receipt.Request{Mode: "panel", PanelReceipt: ch.Panel.Seal}, Targets: []int{1, 1, 0},
			Dump: receipt.Dump{SHA256: hex.EncodeToString(sum[:]), Rows: 3, Vocab: 16}})
	}
	d, err := Offline(dropped("ref.dump", refData, receiptOf(refData, panel("prose"))), dropped("q.dump", testData, receiptOf(testData, panel("prose"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := d.Breakdown
	if b["domain"]["code"].Positions != 1 || b["domain"]["prose"].Positions != 2 || b["role"]["eval"].Positions != 3 ||
		b["domain"]["code"].Flips+b["domain"]["prose"].Flips != d.Report.Summary.Flips {
		t.Fatalf("breakdown %+v", b)
	}
	_, err = Offline(dropped("ref.dump", refData, receiptOf(refData, panel("prose"))), dropped("q.dump", testData, receiptOf(testData, panel("math"))), nil)
	if err == nil || !strings.Contains(err.Error(), "the sides ran different panels") {
		t.Fatalf("different panels: %v", err)
	}
}
