package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"logitscope/checkpoint"
	"logitscope/gpu"
	"logitscope/gpuengine"
	"logitscope/model"
	"logitscope/quant"
	lssession "logitscope/session"
	"logitscope/tokenizer"
	"logitscope/variant"
	"logitscope/wasm/abi"
)

// defaultStops are Qwen's <|im_end|> and <|endoftext|>, as the CLI uses
// when generation_config.json names no eos ids.
var defaultStops = []int{151645, 151643}

// forward is the engine the request policy drives, chunk by chunk: the
// WGSL program through the gpu imports (gpuengine.Engine), or the CPU
// reference in guest memory (cpuForward, for browsers without WebGPU).
// Both name the region that holds a step's rows; the host reads it before
// the next Submit overwrites it.
type forward interface {
	Submit(tokens []int, all, read bool) (gpuengine.Region, error)
	Chunk() int
	Reset()
	Close()
}

var _ forward = (*gpuengine.Engine)(nil)

// session is the one open model of this instance and its request.
type session struct {
	ck    *checkpoint.Checkpoint
	eng   forward
	vocab int
	stops []int

	req  *abi.Request
	run  *lssession.Run  // the request's policy, shared with the native CLI
	cur  *lssession.Step // the step being submitted chunk by chunk
	at   int             // its next token
	rows int             // rows handed to the host so far
	done bool

	pending     *gpuengine.Region // submitted, awaiting ls_feed
	pendingLast bool              // the pending region ends the current step
}

// open loads the model at a.Model (a guest path) on a.Device. newDevice
// opens the gpu imports; only the GPU path calls it, so a CPU session never
// calls an import (not even info).
func open(data []byte, newDevice func() (gpu.Device, error)) (*session, error) {
	var a abi.Open
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("ls_open: %w", err)
	}
	if a.Model == "" {
		a.Model = "/model"
	}
	switch {
	case a.Capacity < 1:
		return nil, fmt.Errorf("ls_open: capacity %d: want at least 1", a.Capacity)
	case a.Device != "" && a.Device != "gpu" && a.Device != "cpu":
		return nil, fmt.Errorf("ls_open: device %q: want gpu or cpu", a.Device)
	}
	ck, err := checkpoint.Open(a.Model)
	if err != nil {
		return nil, err
	}
	s := &session{ck: ck, vocab: ck.Config.VocabSize, stops: defaultStops}
	if len(ck.Generation.EOSTokenIDs) > 0 {
		s.stops = ck.Generation.EOSTokenIDs
	}
	if err := s.load(a, newDevice); err != nil {
		ck.Close()
		return nil, err
	}
	return s, nil
}

// load verifies the weights a.Variant names, the same for both devices,
// then builds the engine: the GPU uploads them as stored (src), the CPU
// decodes them to float32 (w).
func (s *session) load(a abi.Open, newDevice func() (gpu.Device, error)) error {
	g, err := model.GeometryOf(s.ck.Config)
	if err != nil {
		return fmt.Errorf("%s/%w", s.ck.Dir, err)
	}
	src, w := gpuengine.CheckpointSource(s.ck), model.CheckpointWeights(s.ck)
	v, err := s.openVariant(a.Variant)
	if err != nil {
		return err
	}
	if v != nil {
		src, w = gpuengine.VariantSource(v), v
	}
	if err := model.Check(s.ck.Dir, g, w); err != nil {
		return err
	}
	if a.Device == "cpu" {
		f, err := newCPUForward(s.ck, w, a.Capacity)
		if err != nil {
			return err
		}
		s.eng = f
		return nil
	}
	dev, err := newDevice()
	if err != nil {
		return err
	}
	e, err := gpuengine.New(dev, g, src, gpuengine.Options{Capacity: a.Capacity})
	if err != nil {
		return err
	}
	s.eng = e // only on success: a nil *Engine would make a non-nil forward
	return nil
}

// openVariant opens model/variants/<name> verified against the checkpoint;
// nil for f32 (the checkpoint's own weights).
func (s *session) openVariant(name string) (*variant.Variant, error) {
	switch name {
	case "", "f32":
		return nil, nil
	}
	if _, err := quant.ParseScheme(name); err != nil {
		return nil, fmt.Errorf("ls_open: variant %q: want f32, q8, q6 or q4", name)
	}
	vdir := variant.DefaultDir(s.ck.Dir, name)
	if _, err := os.Stat(filepath.Join(vdir, "manifest.json")); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no variant at %s: run logitscope quantize --scheme %s", vdir, name)
	}
	// variant.Open and Fingerprint hash every shard through WASI: the
	// bytes stream through a small buffer, never held in wasm memory.
	v, err := variant.Open(vdir)
	if err != nil {
		return nil, err
	}
	fp, err := s.ck.Fingerprint()
	if err != nil {
		return nil, err
	}
	if err := v.CheckSource(fp); err != nil {
		return nil, err
	}
	return v, nil
}

func (s *session) close() {
	if s.eng != nil {
		s.eng.Close()
	}
	s.ck.Close()
}

// request starts a greedy decode or a panel, dropping any unfinished one.
func (s *session) request(data []byte) error {
	var r abi.Request
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("ls_request: %w", err)
	}
	s.req, s.run, s.cur, s.at, s.rows, s.done, s.pending = nil, nil, nil, 0, 0, false, nil
	s.eng.Reset()
	if r.Text != nil {
		if len(r.PromptIDs) > 0 {
			return errors.New("ls_request: give prompt_ids or text, not both")
		}
		ids, err := s.chatML(*r.Text, r.System)
		if err != nil {
			return err
		}
		r.PromptIDs = ids
	}
	stops := s.stops
	if r.Stops != nil {
		stops = *r.Stops
	}
	run, err := lssession.New(lssession.Request{Mode: r.Mode, PromptIDs: r.PromptIDs, MaxNew: r.MaxNew,
		Stops: stops, Outputs: r.Outputs, Windows: r.Windows, StreamRows: true})
	if err != nil {
		return fmt.Errorf("ls_request: %w", err)
	}
	s.req, s.run = &r, run
	return nil
}

func (s *session) chatML(text string, system *string) ([]int, error) {
	tok, err := tokenizer.Load(s.ck.TokenizerPath())
	if err != nil {
		return nil, err
	}
	sys := tokenizer.DefaultSystem
	if system != nil {
		sys = *system
	}
	return tok.Encode(tokenizer.ChatML(tokenizer.Turns(sys, text), true)), nil
}

// step submits until a logits region is pending (true) or the request is
// done (false). Chunks of a prefill that read nothing are submitted
// without stopping: the host has nothing to read for them.
func (s *session) step() (bool, error) {
	switch {
	case s.req == nil:
		return false, errors.New("ls_step: no request (call ls_request first)")
	case s.pending != nil:
		return false, errors.New("ls_step: the last region was not fed back (call ls_feed first)")
	case s.done:
		return false, nil
	}
	c, v := s.eng.Chunk(), s.vocab
	for {
		if s.cur == nil {
			st, ok := s.run.Next()
			if !ok {
				s.done = true
				return false, nil
			}
			s.cur, s.at = &st, 0
			if st.Reset {
				s.eng.Reset()
			}
		}
		// The chunk [a, b) of the step, and the kept rows within it.
		st, a := s.cur, s.at
		b := min(len(st.Tokens), a+c)
		s.at = b
		last := b == len(st.Tokens)
		lo, hi := max(a, st.Keep[0]), min(b, st.Keep[1])
		if lo >= hi {
			if last {
				// Nothing kept and nothing after it in this step: a panel
				// window's last token predicts past the window.
				s.cur = nil
				if err := s.run.Advance(); err != nil {
					return false, err
				}
				continue
			}
			if _, err := s.eng.Submit(st.Tokens[a:b], false, false); err != nil {
				return false, err
			}
			continue
		}
		// Only the last row: the engine computes just that one, exactly as
		// Forward(tokens, false) does.
		all := !(lo == b-1 && hi == b)
		r, err := s.eng.Submit(st.Tokens[a:b], all, true)
		if err != nil {
			return false, err
		}
		if all {
			r.Offset += int64((lo - a) * v * 4)
			r.Rows = hi - lo
			r.Size = int64(r.Rows * v * 4)
		}
		s.pending, s.pendingLast = &r, last
		return true, nil
	}
}

// region encodes the pending region for ls_region.
func (s *session) region(out []byte) error {
	if s.pending == nil {
		return errors.New("ls_region: no region pending (ls_step did not return 1)")
	}
	r := s.pending
	binary.LittleEndian.PutUint32(out[0:], uint32(r.Buffer))
	binary.LittleEndian.PutUint64(out[4:], uint64(r.Offset))
	binary.LittleEndian.PutUint64(out[12:], uint64(r.Size))
	binary.LittleEndian.PutUint32(out[20:], uint32(r.Rows))
	return nil
}

// feed takes the pending region's bytes and advances the decode.
func (s *session) feed(raw []byte) error {
	r := s.pending
	switch {
	case r == nil:
		return errors.New("ls_feed: no region pending")
	case int64(len(raw)) != r.Size:
		return fmt.Errorf("ls_feed: %d bytes, the region holds %d (%d rows of %d float32)", len(raw), r.Size, r.Rows, s.vocab)
	}
	s.pending = nil
	s.rows += r.Rows
	if !s.pendingLast {
		return nil
	}
	st := s.cur
	s.cur = nil
	if st.All {
		// Panel and forced rows stay with the host, which keeps them for
		// the dump: the guest never holds a window's rows.
		return s.run.Advance()
	}
	// Greedy: the decoder needs the row to pick the next token.
	return s.run.Feed(gpuengine.Rows(raw, r.Rows, s.vocab))
}

func (s *session) result() ([]byte, error) {
	if s.req == nil {
		return nil, errors.New("ls_result: no request")
	}
	r := s.run.Result()
	res := abi.Result{Mode: s.req.Mode, Rows: s.rows, Done: s.done, Output: r.Output, Stopped: r.Stopped,
		Targets: r.Targets, PromptIDs: s.req.PromptIDs}
	for _, p := range []*[]int{&res.Output, &res.Targets, &res.PromptIDs} {
		if *p == nil {
			*p = []int{}
		}
	}
	return json.Marshal(res)
}
