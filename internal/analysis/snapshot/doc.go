// Package snapshot holds the document the page renders: a run's spec, the
// margins report of reference against test, the texts of the tokens it
// shows, and how long it took. The page builds one after a run (or from
// two dropped dumps), shows it, exposes it as window.logitscope.result,
// and shares it: POST /api/runs stores it and /r/<id> renders it again
// without rerunning, so the view a teammate opens is the same document.
package snapshot

import (
	"encoding/json"
	"fmt"
	"strconv"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/split"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
)

// Kind and Version identify the document; the server refuses others.
const (
	Kind    = "logitscope.snapshot"
	Version = 1
	// MaxBytes bounds a stored document (the server's POST limit).
	MaxBytes = 16 << 20
	// TopK is how many tokens of each side the inspector lists.
	TopK = 10
)

// Doc is the document.
type Doc struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Spec is the run's request; nil for a comparison of dropped dumps.
	Spec      *Spec `json:"spec,omitempty"`
	Ref       Side  `json:"ref"`
	Test      Side  `json:"test"`
	PromptIDs []int `json:"prompt_ids"`
	// Tokens[i] is the token position i predicts on the reference side:
	// the greedy output, a panel's target, or the reference's argmax.
	Tokens []int `json:"tokens"`
	// Texts maps a token id (decimal) to its text, for every id the view
	// shows: the prompt, Tokens and both sides' top-k.
	Texts   map[string]string `json:"texts"`
	Report  *margins.Report   `json:"report"`
	Timing  Timing            `json:"timing"`
	Created string            `json:"created,omitempty"` // RFC 3339, the browser's clock
	// Model is what the page knew of the model; nil when nothing (a
	// comparison of dropped dumps).
	Model *Model `json:"model,omitempty"`
	// Windows are a panel's windows, in order; nil otherwise.
	Windows []Window `json:"windows,omitempty"`
	// View is what the page showed when the document was shared.
	View *View `json:"view,omitempty"`
	// Breakdown is the report's statistics by the domain and role of the
	// panel windows the dropped dumps' receipts bind; nil otherwise.
	Breakdown margins.Breakdown `json:"breakdown,omitempty"`
	// Conform is the conformance case the document is of (conform's
	// snapshot of a case); nil otherwise.
	Conform *Conform `json:"conform,omitempty"`
	// Split is the three-way split the comparison was shown with (a
	// reference, the file decoded exactly as Test, and the engine's
	// dump); nil otherwise.
	Split *Split `json:"split,omitempty"`
}

// Split is a three-way split (package split, as report --engine-dump
// prints it) of Ref and Test with an engine's capture of the same file:
// what the file does next to what the engine adds.
type Split struct {
	Engine Side          `json:"engine"`
	Report *split.Report `json:"report"`
}

// SetSplit adds rep, the split of d's sides with engine's, and the texts
// of the engine's choices (text: nil, ids only).
func (d *Doc) SetSplit(engine Side, rep *split.Report, text func(int) string) {
	engine.Rows = rep.Positions
	d.Split = &Split{Engine: engine, Report: rep}
	if text == nil {
		return
	}
	for _, p := range rep.Rows {
		if k := strconv.Itoa(p.EngineTop); d.Texts[k] == "" {
			d.Texts[k] = text(p.EngineTop)
		}
	}
}

// Conform names the conformance case a document shows and the thresholds
// it failed, worded as conform's table and JUnit file word them, so that
// a link from a CI log opens on the failing metric beside its positions.
type Conform struct {
	Suite string `json:"suite"`
	Case  string `json:"case"`
	// Pair is which of the case's captures this is (1-based) of Pairs: a
	// case of several prompts compares one pair of dumps per prompt.
	Pair     int      `json:"pair"`
	Pairs    int      `json:"pairs"`
	Failures []string `json:"failures,omitempty"` // none: the case passed
}

// Side describes where one side's logits came from.
type Side struct {
	Label   string           `json:"label"`             // the variant, or a dropped file's name
	Device  string           `json:"device,omitempty"`  // webgpu | cpu | a receipt's device
	Adapter string           `json:"adapter,omitempty"` // the GPU adapter's name
	Rows    int              `json:"rows"`
	Receipt *receipt.Receipt `json:"receipt,omitempty"` // a dropped dump's, verified
	GGUF    *GGUF            `json:"gguf,omitempty"`    // the side ran a GGUF file
	// Hub: the side ran a checkpoint a hub tool quantized (its format and
	// fingerprint, "" when not known), as a capture's receipt records it.
	Hub *receipt.Hub `json:"hub,omitempty"`
}

// GGUF is the llama.cpp file a side ran: which file exactly (its sha256),
// and the mix of ggml types its recipe chose, as llama.cpp users name a
// quantization ("Q4_K 169, Q6_K 29, F32 113").
type GGUF struct {
	Name   string         `json:"name"`
	SHA256 string         `json:"sha256,omitempty"` // "" when not known (a dropped receipt's variant is always hashed)
	Bytes  int64          `json:"bytes,omitempty"`
	Types  map[string]int `json:"types"`
	// Local: read from the user's disk in the browser and never uploaded,
	// so a link that reruns the spec asks whoever opens it for the file.
	Local bool `json:"local,omitempty"`
}

// Timing is what the page measured, in milliseconds; 0 when not measured
// (an offline comparison has no run).
type Timing struct {
	PageLoad   float64 `json:"page_load_ms"`   // navigation start to the UI's first render
	OpenRef    float64 `json:"open_ref_ms"`    // files, compile and ls_open of the reference
	FirstToken float64 `json:"first_token_ms"` // run start to the first logit row read back
	RefRun     float64 `json:"ref_run_ms"`
	OpenTest   float64 `json:"open_test_ms"`
	TestRun    float64 `json:"test_run_ms"`
	Analysis   float64 `json:"analysis_ms"`
}

// Capture is one side's rows and what they predict.
type Capture struct {
	Side   Side
	Logits *dump.Logits
	// Rows, when set, is read instead of Logits: a capture too long to
	// hold, read a block at a time (the page's long panels).
	Rows      *dump.Reader
	PromptIDs []int
	Output    []int   // greedy or forced: the tokens chosen after each row
	Targets   []int   // panel: the tokens the rows predict
	Windows   [][]int // panel: the windows fed (the reference's marks the strip)
	Prefix    int     // panel: the tokens each window starts with that are not the text's (its BOS)
}

// Build compares ref with test. targets (the panel's, or nil) make the
// summary teacher-forced, as `logitscope report` does with receipts;
// text gives a token's text (nil: ids only).
func Build(spec *Spec, ref, test Capture, targets []int, text func(id int) string) (*Doc, error) {
	opt := margins.Options{TopK: TopK}
	var rep *margins.Report
	var err error
	if ref.Rows == nil && test.Rows == nil {
		rep, err = margins.Compare(ref.Logits, test.Logits, targets, opt)
	} else {
		rep, err = margins.CompareReaders(ref.rows("reference"), test.rows("test"), targets, opt)
	}
	if err != nil {
		return nil, err
	}
	return FromReport(spec, ref, test, rep, text), nil
}

// FromReport is the document of a report already computed from ref's and
// test's rows (their Logits and Rows are not read): `logitscope report`
// and conform build theirs with their own options, so that the page shows
// the very numbers they print.
func FromReport(spec *Spec, ref, test Capture, rep *margins.Report, text func(id int) string) *Doc {
	d := &Doc{Kind: Kind, Version: Version, Spec: spec, Ref: ref.Side, Test: test.Side,
		PromptIDs: orEmpty(ref.PromptIDs), Report: rep, Texts: map[string]string{}}
	d.Ref.Rows, d.Test.Rows = rep.Rows, rep.Rows
	d.Windows = windows(ref.Windows, ref.Prefix, rep.Rows)
	d.Tokens = make([]int, rep.Rows)
	for i, p := range rep.Positions {
		switch {
		case i < len(ref.Targets):
			d.Tokens[i] = ref.Targets[i]
		case i < len(ref.Output):
			d.Tokens[i] = ref.Output[i]
		default:
			d.Tokens[i] = p.RefChoice
		}
	}
	if text != nil {
		d.addTexts(text)
	}
	return d
}

// rows reads Rows, or Logits (checked by margins.Compare when both
// sides hold theirs).
func (c Capture) rows(name string) *dump.Reader {
	if c.Rows != nil {
		return c.Rows
	}
	return c.Logits.Reader(name)
}

func (d *Doc) addTexts(text func(int) string) {
	add := func(id int) {
		k := strconv.Itoa(id)
		if _, ok := d.Texts[k]; !ok {
			d.Texts[k] = text(id)
		}
	}
	for _, w := range d.Windows {
		add(w.Token)
	}
	for _, ids := range [][]int{d.PromptIDs, d.Tokens} {
		for _, id := range ids {
			add(id)
		}
	}
	for _, p := range d.Report.Positions {
		for _, t := range append(p.RefTop, p.TestTop...) {
			add(t.ID)
		}
	}
}

// Text is a token's text, or "#id" when the document has none.
func (d *Doc) Text(id int) string {
	if s, ok := d.Texts[strconv.Itoa(id)]; ok {
		return s
	}
	return "#" + strconv.Itoa(id)
}

// Marshal encodes d as the page's Share stores it, checked by Parse: a
// document the CLI writes is one every page opens.
func (d *Doc) Marshal() ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	if _, err := Parse(b); err != nil {
		return nil, fmt.Errorf("%v (a page would refuse this document)", err)
	}
	return b, nil
}

// Parse decodes a stored document and checks that it can be rendered:
// its kind and version, no key given twice, every enumerated field one of
// its values, and every shape the report's (see check).
func Parse(data []byte) (*Doc, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("snapshot: %d bytes, over the %d MiB limit", len(data), MaxBytes>>20)
	}
	var d Doc
	// Unmarshal, unlike a Decoder, refuses anything after the document and
	// leaves noDuplicateKeys valid JSON to scan.
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("snapshot: %v", err)
	}
	if err := noDuplicateKeys(data); err != nil {
		return nil, fmt.Errorf("snapshot: %v", err)
	}
	switch {
	case d.Kind != Kind:
		return nil, fmt.Errorf("snapshot: kind %q, want %q", d.Kind, Kind)
	case d.Version != Version:
		return nil, fmt.Errorf("snapshot: version %d, this page reads %d", d.Version, Version)
	case d.Report == nil:
		return nil, fmt.Errorf("snapshot: no report")
	case len(d.Report.Positions) != d.Report.Rows || len(d.Tokens) != d.Report.Rows:
		return nil, fmt.Errorf("snapshot: report has %d rows, %d positions and %d tokens",
			d.Report.Rows, len(d.Report.Positions), len(d.Tokens))
	}
	if d.Spec != nil {
		if err := d.Spec.Check(); err != nil {
			return nil, fmt.Errorf("snapshot: spec: %v", err)
		}
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("snapshot: %v", err)
	}
	return &d, nil
}

func orEmpty(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}
