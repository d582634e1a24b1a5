// Package session runs one capture request (greedy decoding, feeding back
// a reference's tokens, or a teacher-forced panel) as a state machine: Next
// says which tokens the engine must take, Feed hands back the logit rows.
// A blocking host drives it with Drive; the wasm engine drives it one
// split step at a time, so the browser and the CLI run the same policy.
package session

import (
	"fmt"
	"slices"

	"logitscope/generate"
)

// Modes of a request.
const (
	Greedy = "greedy" // decode from a prompt
	Forced = "forced" // feed back a prompt and its output tokens
	Panel  = "panel"  // teacher-force independent windows
)

// Request is what to run.
type Request struct {
	Mode      string
	PromptIDs []int   // greedy, forced
	MaxNew    int     // greedy
	Stops     []int   // greedy (and forced, to report whether the outputs stopped)
	Outputs   []int   // forced: the tokens to feed back after the prompt
	Windows   [][]int // panel
	// StreamRows says the host keeps the rows it reads (a wasm host streams
	// them out): the result then holds no rows, so memory stays flat.
	StreamRows bool
}

// Capacity is the KV cache a request needs.
func (r Request) Capacity() int {
	switch r.Mode {
	case Forced:
		return len(r.PromptIDs) + len(r.Outputs)
	case Panel:
		n := 0
		for _, w := range r.Windows {
			n = max(n, len(w))
		}
		return n
	}
	return len(r.PromptIDs) + r.MaxNew
}

// Result is what a request produced: Rows[i] is the logit row before
// Output[i] (greedy, forced) or predicting Targets[i] (panel).
type Result struct {
	Rows    [][]float32
	Output  []int
	Argmax  []int // forced: the engine's own top-1 at each row
	Stopped bool
	Targets []int
}

// Step is the next feed: Tokens appended to the sequence (after a Reset of
// the engine when Reset is set), wanting every row's logits when All, else
// only the last row's. Keep is the range of the step's rows (one per token)
// that the result keeps: a panel window's last row predicts past the
// window, and a forced sequence's rows before the prompt's last token chose
// nothing. A host that streams rows in chunks reads only those.
type Step struct {
	Tokens []int
	Reset  bool
	All    bool
	Keep   [2]int
}

// Run is one request in progress.
type Run struct {
	req    Request
	dec    *generate.Decoder // greedy
	window int               // panel: the next window
	done   bool              // forced: fed
	res    Result
}

// New checks a request and starts it.
func New(req Request) (*Run, error) {
	r := &Run{req: req}
	switch req.Mode {
	case Greedy:
		if len(req.PromptIDs) == 0 {
			return nil, fmt.Errorf("greedy request without prompt ids")
		}
		r.dec = generate.NewDecoder(req.PromptIDs, req.MaxNew, req.Stops)
	case Forced:
		if len(req.PromptIDs) == 0 {
			return nil, fmt.Errorf("forced request without prompt ids")
		}
		r.res.Output = req.Outputs
		r.res.Stopped = len(req.Outputs) > 0 && slices.Contains(req.Stops, req.Outputs[len(req.Outputs)-1])
	case Panel:
		for i, w := range req.Windows {
			if len(w) < 2 {
				return nil, fmt.Errorf("panel window %d has %d tokens; a window needs at least 2", i+1, len(w))
			}
		}
	default:
		return nil, fmt.Errorf("unknown request mode %q (greedy, forced, panel)", req.Mode)
	}
	return r, nil
}

// Next is the next step, or false when the request is complete.
func (r *Run) Next() (Step, bool) {
	switch r.req.Mode {
	case Greedy:
		toks := r.dec.Next()
		return Step{Tokens: toks, Reset: len(r.dec.Output) == 0, Keep: [2]int{len(toks) - 1, len(toks)}}, toks != nil
	case Forced:
		if r.done || len(r.req.Outputs) == 0 {
			return Step{}, false
		}
		seq := append(slices.Clip(r.req.PromptIDs), r.req.Outputs[:len(r.req.Outputs)-1]...)
		return Step{Tokens: seq, Reset: true, All: true, Keep: [2]int{len(r.req.PromptIDs) - 1, len(seq)}}, true
	default:
		if r.window == len(r.req.Windows) {
			return Step{}, false
		}
		w := r.req.Windows[r.window]
		return Step{Tokens: w, Reset: true, All: true, Keep: [2]int{0, len(w) - 1}}, true
	}
}

// Feed hands back the kept rows of the last step (Step.Keep).
func (r *Run) Feed(rows [][]float32) error {
	step, ok := r.Next()
	if !ok {
		return fmt.Errorf("fed %d rows after the request was complete", len(rows))
	}
	if want := step.Keep[1] - step.Keep[0]; len(rows) != want {
		return fmt.Errorf("fed %d rows, the step keeps %d", len(rows), want)
	}
	if r.req.Mode == Greedy {
		r.dec.Feed(rows[0])
		if r.req.StreamRows {
			r.dec.Rows = nil
		}
		r.res.Rows, r.res.Output, r.res.Stopped = r.dec.Rows, r.dec.Output, r.dec.Stopped
		return nil
	}
	r.res.Rows = append(r.res.Rows, rows...)
	if r.req.Mode == Forced {
		for _, row := range rows {
			r.res.Argmax = append(r.res.Argmax, generate.Argmax(row))
		}
	}
	return r.Advance()
}

// Advance finishes a forced or panel step whose rows the host keeps itself
// (a wasm host streams them out chunk by chunk): the result then records
// targets and outputs but no rows.
func (r *Run) Advance() error {
	switch r.req.Mode {
	case Greedy:
		return fmt.Errorf("a greedy step needs its row: use Feed")
	case Forced:
		if r.done {
			return fmt.Errorf("advanced after the request was complete")
		}
		r.done = true
	default:
		if r.window == len(r.req.Windows) {
			return fmt.Errorf("advanced after the request was complete")
		}
		r.res.Targets = append(r.res.Targets, r.req.Windows[r.window][1:]...)
		r.window++
	}
	return nil
}

// Result is what the request produced so far.
func (r *Run) Result() Result { return r.res }

// Engine is a blocking engine: the CPU reference, or the GPU engine with
// its readback.
type Engine interface {
	generate.Forwarder
	Reset()
}

// Drive runs a request to completion on a blocking engine.
func Drive(e Engine, req Request) (Result, error) {
	r, err := New(req)
	if err != nil {
		return Result{}, err
	}
	for step, ok := r.Next(); ok; step, ok = r.Next() {
		if step.Reset {
			e.Reset()
		}
		rows, err := e.Forward(step.Tokens, step.All)
		if err != nil {
			return r.Result(), err
		}
		if step.All {
			rows = rows[step.Keep[0]:step.Keep[1]]
		}
		if err := r.Feed(rows); err != nil {
			return r.Result(), err
		}
	}
	return r.Result(), nil
}

// Windows cuts a tokenized text into panel windows of n tokens; a last
// window shorter than 2 tokens predicts nothing and is dropped.
func Windows(ids []int, n int) [][]int {
	var windows [][]int
	for a := 0; a+1 < len(ids); a += n {
		windows = append(windows, ids[a:min(a+n, len(ids))])
	}
	return windows
}
