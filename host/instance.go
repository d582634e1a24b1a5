package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"

	"logitscope/internal/gpu"
	"logitscope/wasm/abi"
)

// Instance is one instance of engine.wasm with a model open. Not safe for
// concurrent use. After a trap every method returns ErrClosed.
type Instance struct {
	mod     api.Module
	st      *state
	timeout time.Duration // Module.CallTimeout
}

// Close discards the instance. The device stays open.
func (e *Instance) Close(ctx context.Context) error {
	if e.mod == nil {
		return nil
	}
	err := e.mod.Close(ctx)
	e.mod = nil
	if e.st.simd != nil {
		e.st.simd.Close(ctx)
		e.st.simd, e.st.kernels, e.st.calls = nil, nil, nil
	}
	return err
}

// Result is what ls_result reports.
type Result = abi.Result

// Greedy decodes at most maxNew tokens after promptIDs, stopping after a
// stop id (nil: the model's eos ids), and returns the logit row before each
// output token.
func (e *Instance) Greedy(ctx context.Context, promptIDs []int, maxNew int, stops []int) (rows [][]float32, output []int, stopped bool, err error) {
	req := abi.Request{Mode: "greedy", PromptIDs: promptIDs, MaxNew: maxNew}
	if stops != nil {
		req.Stops = &stops
	}
	rows, res, err := e.Run(ctx, req)
	return rows, res.Output, res.Stopped, err
}

// Forced feeds promptIDs and outputs back and returns the rows that chose
// each output (teacher-forced agreement with a reference capture).
func (e *Instance) Forced(ctx context.Context, promptIDs, outputs []int) ([][]float32, error) {
	rows, _, err := e.Run(ctx, abi.Request{Mode: "forced", PromptIDs: promptIDs, Outputs: outputs})
	return rows, err
}

// Panel teacher-forces each window from an empty cache and returns the
// rows that predict each window's tokens 1..n−1, and those tokens.
func (e *Instance) Panel(ctx context.Context, windows [][]int) (rows [][]float32, targets []int, err error) {
	rows, res, err := e.Run(ctx, abi.Request{Mode: "panel", Windows: windows})
	return rows, res.Targets, err
}

// Run sends a request (ls_request's JSON) and drives the split-step loop:
// step, read the region from the device, feed its bytes back, until the
// guest says done. It keeps the rows in order.
func (e *Instance) Run(ctx context.Context, req any) ([][]float32, Result, error) {
	js, err := json.Marshal(req)
	if err != nil {
		return nil, Result{}, err
	}
	if _, err := e.callIn(ctx, "ls_request", js); err != nil {
		return nil, Result{}, err
	}
	vocab := 0
	var rows [][]float32
	for {
		r, err := e.call(ctx, "ls_step")
		if err != nil {
			return rows, Result{}, err
		}
		if r == 0 {
			break
		}
		if r == 2 { // a prefill chunk: nothing to read (a browser shows ls_progress here)
			continue
		}
		reg, err := e.region(ctx)
		if err != nil {
			return rows, Result{}, err
		}
		raw, err := e.read(reg)
		if err != nil {
			return rows, Result{}, err
		}
		// Rows of another length would shift every later logit.
		n := int(reg.Size / 4 / uint64(reg.Rows))
		if vocab != 0 && n != vocab {
			return rows, Result{}, fmt.Errorf("host: ls_region: rows of %d logits after rows of %d", n, vocab)
		}
		vocab = n
		if _, err := e.callIn(ctx, "ls_feed", raw); err != nil {
			return rows, Result{}, err
		}
		rows = append(rows, gpu.Float32Rows(raw, vocab)...)
	}
	res, err := e.result(ctx)
	return rows, res, err
}

// Progress is ls_progress: how many of the request's known input tokens
// the guest has submitted.
func (e *Instance) Progress(ctx context.Context) (abi.Progress, error) {
	b, err := e.block(ctx, "ls_progress", abi.ProgressSize)
	if err != nil {
		return abi.Progress{}, err
	}
	return abi.DecodeProgress(b), nil
}

func (e *Instance) region(ctx context.Context) (abi.Region, error) {
	b, err := e.block(ctx, "ls_region", abi.RegionSize)
	if err != nil {
		return abi.Region{}, err
	}
	return abi.DecodeRegion(b), nil
}

// block calls an export that writes a block of size bytes at the guest
// address it is given, and returns a copy of the block.
func (e *Instance) block(ctx context.Context, export string, size uint32) ([]byte, error) {
	p, err := e.malloc(ctx, size)
	if err != nil {
		return nil, err
	}
	defer e.free(ctx, p)
	if _, err := e.call(ctx, export, uint64(p)); err != nil {
		return nil, err
	}
	b, err := bytes(e.mod, p, size)
	if err != nil {
		return nil, fmt.Errorf("host: %s: block %w", export, err)
	}
	return append([]byte(nil), b...), nil // the block is freed on return
}

// read copies a region's bytes: from the device, or from guest memory
// when the guest computed the rows itself (buffer 0, offset = address).
// A copy, because the guest reuses that memory on the next step. A region
// that is not whole float32 rows is refused: its rows could not be split.
func (e *Instance) read(reg abi.Region) ([]byte, error) {
	if reg.Rows == 0 || reg.Size == 0 || reg.Size%(4*uint64(reg.Rows)) != 0 {
		return nil, fmt.Errorf("host: ls_region: %d bytes in %d rows: not rows of float32 logits", reg.Size, reg.Rows)
	}
	if reg.Buffer != 0 {
		if reg.Offset > math.MaxInt64 || reg.Size > math.MaxInt64 {
			return nil, fmt.Errorf("host: ls_region: buffer %d at %d, %d bytes: out of range", reg.Buffer, reg.Offset, reg.Size)
		}
		return e.st.dev.ReadBuffer(gpu.Buffer(reg.Buffer), int64(reg.Offset), int64(reg.Size))
	}
	if reg.Offset+reg.Size < reg.Offset || reg.Offset+reg.Size > math.MaxUint32 {
		return nil, fmt.Errorf("host: ls_region: guest rows at %#x, %d bytes: outside wasm32 memory", reg.Offset, reg.Size)
	}
	b, ok := e.mod.Memory().Read(uint32(reg.Offset), uint32(reg.Size))
	if !ok {
		return nil, fmt.Errorf("host: ls_region: guest rows [%#x, +%d) are outside guest memory", reg.Offset, reg.Size)
	}
	return append([]byte(nil), b...), nil
}

func (e *Instance) result(ctx context.Context) (Result, error) {
	var res Result
	js, err := e.callOut(ctx, "ls_result")
	if err == nil {
		err = json.Unmarshal(js, &res)
	}
	return res, err
}

// call calls an export. A negative status becomes the guest's message; a
// trap closes the instance.
func (e *Instance) call(ctx context.Context, name string, args ...uint64) (int32, error) {
	out, err := e.invoke(ctx, name, args...)
	if err != nil || len(out) == 0 {
		return 0, err
	}
	r := int32(uint32(out[0]))
	if r >= 0 {
		return r, nil
	}
	if name == "ls_error" { // asking ls_error about itself would never end
		return r, fmt.Errorf("ls_error: status %d: the guest cannot say what went wrong", r)
	}
	msg, err := e.callOut(ctx, "ls_error")
	if err != nil {
		return r, fmt.Errorf("%s: status %d (ls_error: %v)", name, r, err)
	}
	// The guest's messages mostly name their export already; the browser
	// host prefixes the same way.
	if strings.HasPrefix(string(msg), name+":") {
		return r, errors.New(string(msg))
	}
	return r, fmt.Errorf("%s: %s", name, msg)
}

// invoke calls an export, bounded by ctx and the instance's timeout. Any
// error of the call itself (a trap, or ctx done, on which wazero closes
// the module) leaves the guest unusable: the instance is discarded.
func (e *Instance) invoke(ctx context.Context, name string, args ...uint64) ([]uint64, error) {
	if e.mod == nil {
		return nil, ErrClosed
	}
	f := e.mod.ExportedFunction(name)
	if f == nil {
		return nil, fmt.Errorf("host: engine.wasm exports no %s", name)
	}
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if e.timeout > 0 {
		callCtx, cancel = context.WithTimeout(ctx, e.timeout)
	}
	defer cancel()
	out, err := f.Call(withState(callCtx, e.st), args...)
	if err == nil {
		return out, nil
	}
	e.Close(context.WithoutCancel(ctx))
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("host: %s stopped, instance discarded: %w", name, ctx.Err())
	case callCtx.Err() != nil:
		return nil, fmt.Errorf("host: %s did not return within the call timeout of %v, instance discarded: %w", name, e.timeout, callCtx.Err())
	}
	return nil, fmt.Errorf("host: %s trapped, instance discarded: %w", name, err)
}

// callIn copies data into a fresh guest block and calls name(ptr, len).
func (e *Instance) callIn(ctx context.Context, name string, data []byte) (int32, error) {
	p, err := e.malloc(ctx, uint32(len(data)))
	if err != nil {
		return 0, err
	}
	defer e.free(ctx, p)
	if !e.mod.Memory().Write(p, data) {
		return 0, fmt.Errorf("host: ls_malloc(%d) returned a block at %#x outside guest memory", len(data), p)
	}
	return e.call(ctx, name, uint64(p), uint64(len(data)))
}

// maxOut bounds the value of a length-returning export: ls_result's JSON
// for a long panel is a few MB. A longer length is a guest bug that must
// not make the host allocate it.
const maxOut = 64 << 20

// callOut calls name(ptr, cap) -> len with a 4 KiB block and, when the
// value is longer, once more with a block of its length: the call returns
// the full length (wasm/ABI.md), so a second miss is a guest bug, not a
// reason to try again.
func (e *Instance) callOut(ctx context.Context, name string) ([]byte, error) {
	size := uint32(4096)
	for try := 1; ; try++ {
		p, err := e.malloc(ctx, size)
		if err != nil {
			return nil, err
		}
		n, err := e.call(ctx, name, uint64(p), uint64(size))
		switch {
		case err != nil:
		case uint32(n) <= size:
			b, ok := e.mod.Memory().Read(p, uint32(n))
			if !ok {
				err = fmt.Errorf("host: %s: its %d bytes at %#x are outside guest memory", name, n, p)
				break
			}
			out := append([]byte(nil), b...)
			e.free(ctx, p)
			return out, nil
		case n > maxOut:
			err = fmt.Errorf("host: %s: a value of %d bytes, more than the host takes (%d)", name, n, maxOut)
		case try > 1:
			err = fmt.Errorf("host: %s: %d bytes, after a block of the %d bytes it asked for", name, n, size)
		}
		e.free(ctx, p)
		if err != nil {
			return nil, err
		}
		size = uint32(n)
	}
}

func (e *Instance) malloc(ctx context.Context, n uint32) (uint32, error) {
	out, err := e.invoke(ctx, "ls_malloc", uint64(n))
	if err != nil {
		return 0, err
	}
	return uint32(out[0]), nil
}

// free releases a block; a failure has already discarded the instance, and
// the error that matters is the one of the call the block was for.
func (e *Instance) free(ctx context.Context, p uint32) {
	e.invoke(ctx, "ls_free", uint64(p))
}
