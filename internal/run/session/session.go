// Package session runs one capture request (greedy decoding, feeding back
// a reference's tokens, or a teacher-forced panel) as a state machine over
// an engine's submissions: Next says which chunk of tokens the engine takes
// and which of its logit rows to keep, Feed hands those rows back. Drive
// runs it on a blocking host; engine.wasm runs it one split step at a time,
// so the CLI, CI and the browser run the same policy and the same chunks.
package session

import (
	"fmt"
	"slices"

	"logitscope/internal/engine"
	"logitscope/internal/format/routing"
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
	// Prefix is what each panel window of text starts with (the model's
	// BOS), recorded in receipts; Windows already hold it.
	Prefix []int
	// StreamRows says the host keeps the rows it reads (a wasm host streams
	// them out): Feed then takes no rows for forced and panel chunks, and
	// the result holds none, so memory stays flat.
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

// Tokens is how many tokens a request runs through the engine at most:
// greedy decoding may stop before MaxNew.
func (r Request) Tokens() int {
	switch r.Mode {
	case Forced:
		return len(r.PromptIDs) + max(len(r.Outputs)-1, 0)
	case Panel:
		n := 0
		for _, w := range r.Windows {
			n += len(w)
		}
		return n
	}
	return len(r.PromptIDs) + max(r.MaxNew-1, 0)
}

// Result is what a request produced: Rows[i] is the logit row (Vocab
// logits) before Output[i] (greedy, forced) or predicting Targets[i]
// (panel), and for a mixture of experts Routes[i] is the experts that row's
// token was routed to (the engine row's values after the logits; nil for a
// dense model).
type Result struct {
	Rows    [][]float32
	Routes  [][]int32
	Output  []int
	Argmax  []int // forced: the engine's own top-1 at each row
	Stopped bool
	Targets []int
}

// Chunk is one submission: at most the engine's chunk of tokens, after a
// Reset of the engine when Reset is set, computing the rows Want asks for,
// of which the result keeps [Keep[0], Keep[1]). A host reads only those.
type Chunk struct {
	Tokens []int
	Reset  bool
	Want   engine.Want
	Keep   [2]int
}

// step is one pass over a sequence: a greedy prefill or decoded token, a
// forced sequence, a panel window. keep is the range of its rows (one per
// token) that the result keeps: a panel window's last row predicts past
// the window, and a forced sequence's rows before the prompt's last token
// chose nothing.
type step struct {
	tokens []int
	reset  bool
	all    bool // rows past the last one are kept
	keep   [2]int
}

// chunks cuts a step into submissions of at most size tokens. A chunk
// keeping only its last row asks for that row alone, as decoding does; a
// last chunk keeping nothing is not submitted at all.
func (st step) chunks(size int) []Chunk {
	var out []Chunk
	for a := 0; a < len(st.tokens); a += size {
		b := min(len(st.tokens), a+size)
		lo, hi := max(a, st.keep[0]), min(b, st.keep[1])
		c := Chunk{Tokens: st.tokens[a:b], Reset: st.reset && a == 0}
		switch {
		case lo >= hi && b == len(st.tokens):
			return out
		case lo >= hi:
			c.Want = engine.None
		case lo == b-1 && hi == b:
			c.Want, c.Keep = engine.Last, [2]int{0, 1}
		default:
			c.Want, c.Keep = engine.All, [2]int{lo - a, hi - a}
		}
		out = append(out, c)
	}
	return out
}

// Run is one request in progress.
type Run struct {
	req     Request
	size    int      // the engine's chunk
	vocab   int      // logits per row; the rest of a row is routes
	dec     *decoder // greedy
	window  int      // panel: the window being run
	fed     bool     // forced: its one step is under way or done
	pending []Chunk  // the current step's chunks not yet fed
	res     Result
}

// New checks a request and starts it for an engine taking chunks of size
// tokens, whose rows start with vocab logits (engine.Engine's Chunk and
// Vocab).
func New(req Request, size, vocab int) (*Run, error) {
	if size < 1 {
		return nil, fmt.Errorf("chunk of %d tokens: want at least 1", size)
	}
	if vocab < 1 {
		return nil, fmt.Errorf("rows of %d logits: want at least 1", vocab)
	}
	r := &Run{req: req, size: size, vocab: vocab}
	switch req.Mode {
	case Greedy:
		if len(req.PromptIDs) == 0 {
			return nil, fmt.Errorf("greedy request without prompt ids")
		}
		r.dec = newDecoder(req.PromptIDs, req.MaxNew, req.Stops)
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

// nextStep starts the request's next step, or says it is complete.
func (r *Run) nextStep() (step, bool) {
	switch r.req.Mode {
	case Greedy:
		toks := r.dec.next()
		return step{tokens: toks, reset: len(r.dec.output) == 0, keep: [2]int{len(toks) - 1, len(toks)}}, toks != nil
	case Forced:
		if r.fed || len(r.req.Outputs) == 0 {
			return step{}, false
		}
		r.fed = true
		seq := append(slices.Clip(r.req.PromptIDs), r.req.Outputs[:len(r.req.Outputs)-1]...)
		return step{tokens: seq, reset: true, all: true, keep: [2]int{len(r.req.PromptIDs) - 1, len(seq)}}, true
	default:
		if r.window == len(r.req.Windows) {
			return step{}, false
		}
		w := r.req.Windows[r.window]
		return step{tokens: w, reset: true, all: true, keep: [2]int{0, len(w) - 1}}, true
	}
}

// Next is the next submission, the same one until it is fed, or false
// when the request is complete.
func (r *Run) Next() (Chunk, bool) {
	if len(r.pending) == 0 {
		st, ok := r.nextStep()
		if !ok {
			return Chunk{}, false
		}
		r.pending = st.chunks(r.size)
	}
	return r.pending[0], true
}

// Feed hands back the kept rows of the chunk Next gave (Chunk.Keep), as
// the engine wrote them: the logits, then any routes, which Feed splits
// off so that argmax and the result's rows see only the logits. With
// StreamRows, forced and panel chunks take none: the host keeps them.
func (r *Run) Feed(rows [][]float32) error {
	if len(r.pending) == 0 {
		return fmt.Errorf("fed %d rows with no chunk pending (call Next first)", len(rows))
	}
	c := r.pending[0]
	want := c.Keep[1] - c.Keep[0]
	streamed := r.req.StreamRows && r.req.Mode != Greedy && rows == nil
	if len(rows) != want && !streamed {
		return fmt.Errorf("fed %d rows, the chunk keeps %d", len(rows), want)
	}
	logits, routes, err := routing.SplitRows(rows, r.vocab)
	if err != nil {
		return fmt.Errorf("the chunk's %v", err)
	}
	r.pending = r.pending[1:]
	keep := func() {
		if !r.req.StreamRows {
			r.res.Rows = append(r.res.Rows, logits...)
			if routes != nil {
				r.res.Routes = append(r.res.Routes, routes...)
			}
		}
	}
	switch r.req.Mode {
	case Greedy:
		if want > 0 {
			// The decoder needs the row to pick the next token.
			r.dec.feed(logits[0])
			r.res.Output, r.res.Stopped = r.dec.output, r.dec.stopped
			keep()
		}
	case Forced:
		keep()
		for _, row := range logits {
			r.res.Argmax = append(r.res.Argmax, Argmax(row))
		}
	case Panel:
		keep()
		if len(r.pending) == 0 {
			r.res.Targets = append(r.res.Targets, r.req.Windows[r.window][1:]...)
			r.window++
		}
	}
	return nil
}

// Result is what the request produced so far.
func (r *Run) Result() Result { return r.res }
