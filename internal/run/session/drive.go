package session

import (
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"slices"
)

// Drive runs a request to completion on a blocking host: each chunk
// submitted, its kept rows read back and fed.
func Drive(e engine.Engine, req Request) (Result, error) {
	return DriveTracked(e, req, nil)
}

// DriveTracked is Drive telling ran, if not nil, the tokens of each chunk
// once it has run (Request.Tokens in all, or fewer when decoding stops).
func DriveTracked(e engine.Engine, req Request, ran func(tokens int)) (Result, error) {
	r, err := New(req, e.Chunk(), e.Vocab())
	if err != nil {
		return Result{}, err
	}
	for c, ok := r.Next(); ok; c, ok = r.Next() {
		rows, err := submit(e, c)
		if err != nil {
			return r.Result(), err
		}
		if ran != nil {
			ran(len(c.Tokens))
		}
		if err := r.Feed(rows); err != nil {
			return r.Result(), err
		}
	}
	return r.Result(), nil
}

// Forward appends tokens to e's sequence, in the chunks a request would
// take, and returns its rows as the engine wrote them (logits, then any
// routes: engine.Width): one per token with all, else only the last. For
// tests and benchmarks that drive an engine by hand.
func Forward(e engine.Engine, tokens []int, all bool) ([][]float32, error) {
	if len(tokens) == 0 {
		return nil, nil
	}
	st := step{tokens: tokens, all: all, keep: [2]int{len(tokens) - 1, len(tokens)}}
	if all {
		st.keep[0] = 0
	}
	var out [][]float32
	for _, c := range st.chunks(e.Chunk()) {
		rows, err := submit(e, c)
		if err != nil {
			return out, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// submit runs one chunk on a blocking engine and reads its kept rows.
func submit(e engine.Engine, c Chunk) ([][]float32, error) {
	if c.Reset {
		e.Reset()
	}
	reg, err := e.Submit(c.Tokens, c.Want)
	if err != nil {
		return nil, err
	}
	return e.Read(reg.Slice(c.Keep[0], c.Keep[1], engine.Width(e)))
}

// qwenStops are Qwen's <|im_end|> and <|endoftext|>: the stop ids when a
// model's generation_config.json names none.
var qwenStops = []int{151645, 151643}

// Stops is where decoding stops by default: generation_config.json's eos
// ids, else Qwen's.
func Stops(gen checkpoint.GenerationConfig) []int {
	if len(gen.EOSTokenIDs) > 0 {
		return gen.EOSTokenIDs
	}
	return qwenStops
}

// Windows cuts a tokenized text into panel windows of n tokens, each
// starting with prefix (the model's BOS, as a document does) and going on
// with the text where the last one stopped; a last window shorter than 2
// tokens predicts nothing and is dropped.
func Windows(ids []int, n int, prefix []int) [][]int {
	step := n - len(prefix)
	if step < 1 {
		return nil
	}
	var windows [][]int
	for a := 0; a < len(ids); a += step {
		w := append(slices.Clip(prefix), ids[a:min(a+step, len(ids))]...)
		if len(w) < 2 {
			break
		}
		windows = append(windows, w)
	}
	return windows
}
