package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"logitscope/checkpoint"
	"logitscope/generate"
	"logitscope/gpu"
	"logitscope/gpuengine"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/tokenizer"
	"logitscope/variant"
)

// defaultStops are Qwen's <|im_end|> and <|endoftext|>, as the CLI uses
// when generation_config.json names no eos ids.
var defaultStops = []int{151645, 151643}

// openArgs is ls_open's JSON.
type openArgs struct {
	Model    string `json:"model"`
	Variant  string `json:"variant"`
	Capacity int    `json:"capacity"`
}

// requestArgs is ls_request's JSON.
type requestArgs struct {
	Mode      string  `json:"mode"` // greedy | forced | panel
	PromptIDs []int   `json:"prompt_ids"`
	Text      *string `json:"text"`   // greedy: a user turn templated with ChatML
	System    *string `json:"system"` // with text; absent: the default system prompt
	MaxNew    int     `json:"max_new"`
	Stops     *[]int  `json:"stops"` // absent: generation_config.json's eos ids
	Windows   [][]int `json:"windows"`
	Outputs   []int   `json:"outputs"` // forced: fed back after the prompt
}

// result is ls_result's JSON.
type result struct {
	Mode      string `json:"mode"`
	PromptIDs []int  `json:"prompt_ids"`
	Output    []int  `json:"output"`
	Stopped   bool   `json:"stopped"`
	Targets   []int  `json:"targets"`
	Rows      int    `json:"rows"`
	Done      bool   `json:"done"`
}

// session is the one open model of this instance and its request.
type session struct {
	dev   gpu.Device
	ck    *checkpoint.Checkpoint
	eng   *gpuengine.Engine
	vocab int
	stops []int

	req    *requestArgs
	dec    *generate.Decoder
	window int // panel: the window being fed
	at     int // panel: its next token
	rows   int // rows handed to the host so far
	done   bool

	pending *gpuengine.Region // submitted, awaiting ls_feed
}

// open loads the model at a.Model (a guest path) onto dev.
func open(dev gpu.Device, data []byte) (*session, error) {
	var a openArgs
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("ls_open: %w", err)
	}
	if a.Model == "" {
		a.Model = "/model"
	}
	if a.Capacity < 1 {
		return nil, fmt.Errorf("ls_open: capacity %d: want at least 1", a.Capacity)
	}
	ck, err := checkpoint.Open(a.Model)
	if err != nil {
		return nil, err
	}
	s := &session{dev: dev, ck: ck, vocab: ck.Config.VocabSize, stops: defaultStops}
	if len(ck.Generation.EOSTokenIDs) > 0 {
		s.stops = ck.Generation.EOSTokenIDs
	}
	if err := s.load(a); err != nil {
		ck.Close()
		return nil, err
	}
	return s, nil
}

func (s *session) load(a openArgs) error {
	g, err := model.GeometryOf(s.ck.Config)
	if err != nil {
		return fmt.Errorf("%s/%w", s.ck.Dir, err)
	}
	src, w := gpuengine.CheckpointSource(s.ck), model.CheckpointWeights(s.ck)
	switch a.Variant {
	case "", "f32":
	default:
		if _, err := quant.ParseScheme(a.Variant); err != nil {
			return fmt.Errorf("ls_open: variant %q: want f32, q8, q6 or q4", a.Variant)
		}
		vdir := variant.DefaultDir(s.ck.Dir, a.Variant)
		if _, err := os.Stat(filepath.Join(vdir, "manifest.json")); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no variant at %s: run logitscope quantize --scheme %s", vdir, a.Variant)
		}
		// variant.Open and Fingerprint hash every shard through WASI: the
		// bytes stream through a small buffer, never held in wasm memory.
		v, err := variant.Open(vdir)
		if err != nil {
			return err
		}
		fp, err := s.ck.Fingerprint()
		if err != nil {
			return err
		}
		if err := v.CheckSource(fp); err != nil {
			return err
		}
		src, w = gpuengine.VariantSource(v), v
	}
	if err := model.Check(s.ck.Dir, g, w); err != nil {
		return err
	}
	s.eng, err = gpuengine.New(s.dev, g, src, gpuengine.Options{Capacity: a.Capacity})
	return err
}

func (s *session) close() {
	if s.eng != nil {
		s.eng.Close()
	}
	s.ck.Close()
}

// request starts a greedy decode or a panel, dropping any unfinished one.
func (s *session) request(data []byte) error {
	var r requestArgs
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("ls_request: %w", err)
	}
	s.req, s.dec, s.window, s.at, s.rows, s.done, s.pending = nil, nil, 0, 0, 0, false, nil
	s.eng.Reset()
	switch r.Mode {
	case "greedy":
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
		if len(r.PromptIDs) == 0 {
			return errors.New("ls_request: greedy needs prompt_ids or text")
		}
		stops := s.stops
		if r.Stops != nil {
			stops = *r.Stops
		}
		s.dec = generate.NewDecoder(r.PromptIDs, r.MaxNew, stops)
	case "forced":
		if len(r.PromptIDs) == 0 {
			return errors.New("ls_request: forced needs prompt_ids")
		}
	case "panel":
		for i, w := range r.Windows {
			if len(w) < 2 {
				return fmt.Errorf("ls_request: window %d has %d tokens, want at least 2", i+1, len(w))
			}
		}
	default:
		return fmt.Errorf("ls_request: mode %q: want greedy, forced or panel", r.Mode)
	}
	s.req = &r
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
	var msgs []tokenizer.Message
	if sys != "" {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: sys})
	}
	msgs = append(msgs, tokenizer.Message{Role: "user", Content: text})
	return tok.Encode(tokenizer.ChatML(msgs, true)), nil
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
	switch s.req.Mode {
	case "greedy":
		return s.greedyStep()
	case "forced":
		return s.forcedStep()
	}
	return s.panelStep()
}

// forcedStep feeds the prompt and the outputs but the last, as
// Forward(seq, true) would, and names only the rows that chose each output
// (from the prompt's last token on): earlier chunks read nothing, and the
// first region that matters starts past the rows before it.
func (s *session) forcedStep() (bool, error) {
	p, out := s.req.PromptIDs, s.req.Outputs
	if len(out) == 0 {
		s.done = true
		return false, nil
	}
	seq := append(p[:len(p):len(p)], out[:len(out)-1]...)
	for s.at < len(seq) {
		a := s.at
		b := min(len(seq), a+s.eng.Chunk())
		s.at = b
		if a == 0 {
			s.eng.Reset()
		}
		read := b-1 >= len(p)-1
		r, err := s.eng.Submit(seq[a:b], true, read)
		if err != nil {
			return false, err
		}
		if !read {
			continue
		}
		skip := max(0, len(p)-1-a)
		r.Rows -= skip
		r.Offset += int64(skip * s.vocab * 4)
		r.Size = int64(r.Rows * s.vocab * 4)
		s.pending = &r
		return true, nil
	}
	s.done = true
	return false, nil
}

// greedyStep submits what the Decoder wants next exactly as
// gpuengine.Engine.Forward(tokens, false) does, so logits match it bit for bit.
func (s *session) greedyStep() (bool, error) {
	toks := s.dec.Next()
	if toks == nil {
		s.done = true
		return false, nil
	}
	c := s.eng.Chunk()
	for a := 0; a < len(toks); a += c {
		b := min(len(toks), a+c)
		r, err := s.eng.Submit(toks[a:b], false, b == len(toks))
		if err != nil {
			return false, err
		}
		if r.Rows > 0 {
			s.pending = &r
		}
	}
	return true, nil
}

// panelStep submits the next chunk of the current window as Forward(w,
// true) would, trimming the window's last row (it predicts past the
// window); a last chunk holding only that row is not submitted at all.
func (s *session) panelStep() (bool, error) {
	for {
		if s.window == len(s.req.Windows) {
			s.done = true
			return false, nil
		}
		w := s.req.Windows[s.window]
		a := s.at
		b := min(len(w), a+s.eng.Chunk())
		if b == len(w) {
			s.window, s.at = s.window+1, 0
		} else {
			s.at = b
		}
		if a == 0 {
			s.eng.Reset()
		}
		if b == len(w) && b-a == 1 {
			continue
		}
		r, err := s.eng.Submit(w[a:b], true, true)
		if err != nil {
			return false, fmt.Errorf("window %d: %w", s.window+1, err)
		}
		if b == len(w) {
			r.Rows--
			r.Size = int64(r.Rows * s.vocab * 4)
		}
		s.pending = &r
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
	if s.dec != nil {
		rows := gpuengine.Rows(raw, r.Rows, s.vocab)
		s.dec.Feed(rows[len(rows)-1])
		// The host keeps the rows for the dump; the guest needs only the argmax.
		s.dec.Rows[len(s.dec.Rows)-1] = nil
	}
	return nil
}

func (s *session) result() ([]byte, error) {
	if s.req == nil {
		return nil, errors.New("ls_result: no request")
	}
	res := result{Mode: s.req.Mode, Rows: s.rows, Done: s.done, Output: []int{}, Targets: []int{}, PromptIDs: []int{}}
	switch {
	case s.dec != nil:
		res.PromptIDs = append(res.PromptIDs, s.req.PromptIDs...)
		res.Output = append(res.Output, s.dec.Output...)
		res.Stopped = s.dec.Stopped
	case s.req.Mode == "forced":
		res.PromptIDs = append(res.PromptIDs, s.req.PromptIDs...)
		res.Output = append(res.Output, s.req.Outputs...)
	default:
		for _, w := range s.req.Windows {
			res.Targets = append(res.Targets, w[1:]...)
		}
	}
	return json.Marshal(res)
}
