package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/routing"
	"logitscope/internal/gpu"
	"logitscope/internal/model"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/session"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
	"logitscope/wasm/abi"
)

// openModel is the one open model of this instance and its request, driven one
// split step at a time: ls_step submits chunks until one names rows to
// read, the host reads them (a device buffer, or guest memory on the CPU
// path) and hands them to ls_feed.
type openModel struct {
	ck     *checkpoint.Checkpoint
	eng    engine.Engine
	routes routing.Layout // what the rows carry after the logits

	req  *abi.Request
	run  *session.Run // the request's policy, shared with the native CLI
	rows int          // rows handed to the host so far
	done bool
	// fed and input are ls_progress's: tokens submitted so far and the
	// tokens the request feeds that are known before it runs.
	fed, input int

	pending *engine.Region // submitted, awaiting ls_feed
	// pin keeps a CPU region's rows at their address while the host reads
	// them between exports: it states the contract rather than leaning on
	// the collector not moving objects.
	pin runtime.Pinner
}

// open loads the model at a.Model (a guest path) on a.Device. blocks are
// the host's ls_malloc blocks (a.Files names some). newDevice opens the
// gpu imports; only the GPU path calls it, so a CPU model never calls an
// import (not even info).
func open(data []byte, blocks map[uint32][]byte, newDevice func() (gpu.Device, error)) (*openModel, error) {
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
	case gguf.IsFileName(a.Variant):
		// A path below the model directory: the guest sees nothing outside
		// the mount.
		if !filepath.IsLocal(a.Variant) {
			return nil, fmt.Errorf("ls_open: variant %q: a GGUF file is named by its path inside the model directory", a.Variant)
		}
	case isHub(a.Variant):
	case a.Variant != "" && a.Variant != "f32":
		// Only the model's own variants: the guest sees nothing outside /model.
		if _, err := variant.ParseScheme(a.Variant); err != nil {
			return nil, fmt.Errorf("ls_open: variant %q: want f32, q8, q6, q4, exl3-kK[-CODEBOOK], a .gguf file in the model directory or hub/DIR, a hub checkpoint under it", a.Variant)
		}
	}
	// A GGUF or a hub checkpoint brings its own weights: the checkpoint
	// only contributes its config and tokenizer, so a browser need not
	// fetch the safetensors. So does a quantized variant, which the
	// checkpoint's weights only verify (its manifest names their
	// fingerprint): a host that mounts the model without them (the page,
	// for a served model) opens it on its manifest's word; with them, the
	// variant is checked against them.
	openCk := checkpoint.Open
	switch {
	case gguf.IsFileName(a.Variant), isHub(a.Variant):
		openCk = checkpoint.OpenWithoutWeights
	case a.Variant != "" && a.Variant != "f32" && !checkpoint.WeightsPresent(a.Model):
		openCk = checkpoint.OpenWithoutWeights
	}
	ck, err := openCk(a.Model)
	if err != nil {
		return nil, err
	}
	m := &openModel{ck: ck}
	if m.eng, err = load(ck, a, blocks, newDevice); err != nil {
		ck.Close()
		return nil, err
	}
	// engine.Open read the same config: it cannot fail here.
	g, _ := model.GeometryOf(ck.Config)
	m.routes = g.RouteLayout()
	return m, nil
}

func load(ck *checkpoint.Checkpoint, a abi.Open, blocks map[uint32][]byte, newDevice func() (gpu.Device, error)) (engine.Engine, error) {
	opt := engine.Options{Capacity: a.Capacity}
	var err error
	if opt.Files, err = takeFiles(a, blocks); err != nil {
		return nil, err
	}
	q, err := openQuantized(ck)
	switch {
	case err != nil:
	case q != nil && a.Variant != "" && a.Variant != "f32":
		err = fmt.Errorf("ls_open: variant %q: the model at %s is a hub quantization (%s), which runs its own weights", a.Variant, ck.Dir, q.Format())
	case q != nil:
		opt.Quantized = q
	case gguf.IsFileName(a.Variant):
		opt.GGUF, err = engine.OpenGGUF(ck, filepath.Join(ck.Dir, a.Variant))
	case isHub(a.Variant):
		opt.Quantized, err = hubquant.OpenFor(ck, filepath.Join(ck.Dir, a.Variant))
	default:
		opt.Variant, err = engine.OpenVariant(ck, a.Variant)
	}
	if err != nil {
		return nil, err
	}
	opt.Activations = a.Activations
	if a.Device != "cpu" {
		if opt.Device, err = newDevice(); err != nil {
			return nil, err
		}
	}
	return engine.Open(ck, opt)
}

// takeFiles is a.Files by path under a.Model, each its block, which
// leaves blocks for the model: from here the engine holds it, and ls_free
// no longer frees it. A block must hold the whole file: the weights are
// sliced from it where the file says they lie.
func takeFiles(a abi.Open, blocks map[uint32][]byte) (map[string][]byte, error) {
	if len(a.Files) == 0 {
		return nil, nil
	}
	if a.Device != "cpu" {
		return nil, errors.New("ls_open: files: only the CPU path takes its weights from guest memory (a GPU's come from the files: upload_file)")
	}
	out := make(map[string][]byte, len(a.Files))
	for name, p := range a.Files {
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("ls_open: files: %q is not a path inside the model directory", name)
		}
		path := filepath.Join(a.Model, name)
		b, ok := blocks[p]
		if !ok {
			return nil, fmt.Errorf("ls_open: files: %s: %#x is not the address of a block from ls_malloc", path, p)
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("ls_open: files: %w", err)
		}
		if st.Size() != int64(len(b)) {
			return nil, fmt.Errorf("ls_open: files: %s has %d bytes, its block at %#x %d", path, st.Size(), p, len(b))
		}
		out[path] = b
	}
	for _, p := range a.Files {
		delete(blocks, p)
	}
	return out, nil
}

func (m *openModel) close() {
	m.pin.Unpin()
	m.eng.Close()
	m.ck.Close()
}

// request starts a greedy decode, a forced sequence or a panel, dropping
// any unfinished request.
func (m *openModel) request(data []byte) error {
	var r abi.Request
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("ls_request: %w", err)
	}
	m.pin.Unpin()
	m.req, m.run, m.rows, m.done, m.pending, m.fed, m.input = nil, nil, 0, false, nil, 0, 0
	m.eng.Reset()
	if r.Text != nil {
		if len(r.PromptIDs) > 0 {
			return errors.New("ls_request: give prompt_ids or text, not both")
		}
		ids, err := m.chatPrompt(*r.Text, r.System)
		if err != nil {
			return err
		}
		r.PromptIDs = ids
	}
	stops := session.Stops(m.ck.Generation)
	if r.Stops != nil {
		stops = *r.Stops
	}
	run, err := session.New(session.Request{Mode: r.Mode, PromptIDs: r.PromptIDs, MaxNew: r.MaxNew,
		Stops: stops, Outputs: r.Outputs, Windows: r.Windows, StreamRows: true}, m.eng.Chunk(), m.eng.Vocab())
	if err != nil {
		return fmt.Errorf("ls_request: %w", err)
	}
	m.req, m.run = &r, run
	m.input = len(r.PromptIDs)
	switch r.Mode {
	case session.Forced:
		m.input += max(len(r.Outputs)-1, 0)
	case session.Panel:
		m.input = 0
		for _, w := range r.Windows {
			m.input += len(w)
		}
	}
	return nil
}

// progress is ls_progress's: the request's known input tokens submitted so
// far and in all (a greedy request's decoded tokens are not counted: the
// rows say how far decoding came).
func (m *openModel) progress() abi.Progress {
	if m.req == nil {
		return abi.Progress{}
	}
	return abi.Progress{Done: uint32(min(m.fed, m.input)), Total: uint32(m.input)}
}

// chatPrompt renders one user turn (after a system turn unless system is
// empty) with the checkpoint's own chat_template, ChatML when it
// has none, and encodes it as transformers does: the rendered text
// carries its BOS.
func (m *openModel) chatPrompt(text, system string) ([]int, error) {
	tok, err := tokenizer.Load(m.ck.TokenizerPath())
	if err != nil {
		return nil, err
	}
	tmpl, err := chat.ConfigBeside(m.ck.TokenizerPath())
	if err != nil {
		return nil, err
	}
	prompt, err := chat.Render(tmpl, tokenizer.Turns(system, text), true)
	if err != nil {
		return nil, err
	}
	return tok.Encode(prompt), nil
}

// What step did, as ls_step returns it.
const (
	stepDone    = 0 // the request is done
	stepRows    = 1 // a region of rows is pending: ls_region, read, ls_feed
	stepPrefill = 2 // a chunk that keeps no row was submitted: call ls_step again
)

// step submits one chunk. A chunk that keeps no row (an early prefill
// chunk) is fed at once, since the host has nothing to read for it, and
// step returns so that the host can wait for the device and show
// ls_progress: a long prefill would otherwise be one silent call.
func (m *openModel) step() (int32, error) {
	switch {
	case m.req == nil:
		return 0, errors.New("ls_step: no request (call ls_request first)")
	case m.pending != nil:
		return 0, errors.New("ls_step: the last region was not fed back (call ls_feed first)")
	case m.done:
		return stepDone, nil
	}
	c, ok := m.run.Next()
	if !ok {
		m.done = true
		return stepDone, nil
	}
	if c.Reset {
		m.eng.Reset()
	}
	r, err := m.eng.Submit(c.Tokens, c.Want)
	if err != nil {
		return 0, err
	}
	m.fed += len(c.Tokens)
	if c.Keep[0] == c.Keep[1] {
		return stepPrefill, m.run.Feed(nil)
	}
	r = r.Slice(c.Keep[0], c.Keep[1], engine.Width(m.eng))
	if r.Host != nil {
		m.pin.Pin(&r.Host[0])
	}
	m.pending = &r
	return stepRows, nil
}

// region encodes the pending region for ls_region: a device buffer, or
// buffer 0 and the guest address of rows the CPU engine computed.
func (m *openModel) region(out []byte) error {
	r := m.pending
	if r == nil {
		return errors.New("ls_region: no region pending (ls_step did not return 1)")
	}
	a := abi.Region{Buffer: uint32(r.Buffer), Offset: uint64(r.Offset), Size: uint64(r.Size), Rows: uint32(r.Rows)}
	if r.Host != nil {
		a.Offset = uint64(uintptr(unsafe.Pointer(&r.Host[0])))
	}
	a.Encode(out)
	return nil
}

// feed takes the pending region's bytes and advances the request.
func (m *openModel) feed(raw []byte) error {
	r := m.pending
	switch {
	case r == nil:
		return errors.New("ls_feed: no region pending")
	case int64(len(raw)) != r.Size:
		return fmt.Errorf("ls_feed: %d bytes, the region holds %d (%d rows of %d float32)", len(raw), r.Size, r.Rows, engine.Width(m.eng))
	}
	m.pending = nil
	m.pin.Unpin()
	m.rows += r.Rows
	if m.req.Mode != session.Greedy {
		// Panel and forced rows stay with the host, which keeps them for
		// the dump: the guest never holds a window's rows.
		return m.run.Feed(nil)
	}
	// Greedy: the decoder needs the row to pick the next token.
	return m.run.Feed(gpu.Float32Rows(raw, engine.Width(m.eng)))
}

func (m *openModel) result() ([]byte, error) {
	if m.req == nil {
		return nil, errors.New("ls_result: no request")
	}
	r := m.run.Result()
	res := abi.Result{Mode: m.req.Mode, Rows: m.rows, Done: m.done, Output: r.Output, Stopped: r.Stopped,
		Targets: r.Targets, PromptIDs: m.req.PromptIDs, Vocab: m.eng.Vocab()}
	if m.routes.Width() > 0 {
		res.Routes = &m.routes
	}
	for _, p := range []*[]int{&res.Output, &res.Targets, &res.PromptIDs} {
		if *p == nil {
			*p = []int{}
		}
	}
	return json.Marshal(res)
}
