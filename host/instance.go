package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero/api"

	"logitscope/gpu"
	"logitscope/wasm/abi"
)

// Instance is one instance of engine.wasm with a model open. Not safe for
// concurrent use. After a trap every method returns ErrClosed.
type Instance struct {
	mod api.Module
	st  *state
}

// Close discards the instance. The device stays open.
func (e *Instance) Close(ctx context.Context) error {
	if e.mod == nil {
		return nil
	}
	err := e.mod.Close(ctx)
	e.mod = nil
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
		reg, err := e.region(ctx)
		if err != nil {
			return rows, Result{}, err
		}
		raw, err := e.read(reg)
		if err != nil {
			return rows, Result{}, err
		}
		if reg.Rows > 0 {
			vocab = int(reg.Size / 4 / uint64(reg.Rows))
		}
		if _, err := e.callIn(ctx, "ls_feed", raw); err != nil {
			return rows, Result{}, err
		}
		rows = append(rows, gpu.Float32Rows(raw, vocab)...)
	}
	res, err := e.result(ctx)
	return rows, res, err
}

func (e *Instance) region(ctx context.Context) (abi.Region, error) {
	p, err := e.malloc(ctx, abi.RegionSize)
	if err != nil {
		return abi.Region{}, err
	}
	defer e.free(ctx, p)
	if _, err := e.call(ctx, "ls_region", uint64(p)); err != nil {
		return abi.Region{}, err
	}
	b, ok := e.mod.Memory().Read(p, abi.RegionSize)
	if !ok {
		return abi.Region{}, errors.New("host: ls_region: block outside memory")
	}
	return abi.DecodeRegion(b), nil
}

// read copies a region's bytes: from the device, or from guest memory
// when the guest computed the rows itself (buffer 0, offset = address).
// A copy, because the guest reuses that memory on the next step.
func (e *Instance) read(reg abi.Region) ([]byte, error) {
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
	if e.mod == nil {
		return 0, ErrClosed
	}
	f := e.mod.ExportedFunction(name)
	if f == nil {
		return 0, fmt.Errorf("host: engine.wasm exports no %s", name)
	}
	out, err := f.Call(withState(ctx, e.st), args...)
	if err != nil {
		e.Close(ctx)
		return 0, fmt.Errorf("host: %s trapped, instance discarded: %w", name, err)
	}
	if len(out) == 0 {
		return 0, nil
	}
	r := int32(uint32(out[0]))
	if r < 0 {
		msg, err := e.callOut(ctx, "ls_error")
		if err != nil {
			return r, fmt.Errorf("%s: status %d (ls_error: %v)", name, r, err)
		}
		return r, fmt.Errorf("%s: %s", name, msg)
	}
	return r, nil
}

// callIn copies data into a fresh guest block and calls name(ptr, len).
func (e *Instance) callIn(ctx context.Context, name string, data []byte) (int32, error) {
	p, err := e.malloc(ctx, uint32(len(data)))
	if err != nil {
		return 0, err
	}
	defer e.free(ctx, p)
	if !e.mod.Memory().Write(p, data) {
		return 0, errors.New("host: ls_malloc returned a block outside memory")
	}
	return e.call(ctx, name, uint64(p), uint64(len(data)))
}

// callOut calls name(ptr, cap) -> len, growing the block until it fits.
func (e *Instance) callOut(ctx context.Context, name string) ([]byte, error) {
	size := uint32(4096)
	for {
		p, err := e.malloc(ctx, size)
		if err != nil {
			return nil, err
		}
		n, err := e.call(ctx, name, uint64(p), uint64(size))
		if err != nil || uint32(n) > size {
			e.free(ctx, p)
			if err != nil {
				return nil, err
			}
			size = uint32(n)
			continue
		}
		b, _ := e.mod.Memory().Read(p, uint32(n))
		out := append([]byte(nil), b...)
		e.free(ctx, p)
		return out, nil
	}
}

func (e *Instance) malloc(ctx context.Context, n uint32) (uint32, error) {
	if e.mod == nil {
		return 0, ErrClosed
	}
	out, err := e.mod.ExportedFunction("ls_malloc").Call(withState(ctx, e.st), uint64(n))
	if err != nil {
		e.Close(ctx)
		return 0, fmt.Errorf("host: ls_malloc trapped, instance discarded: %w", err)
	}
	return uint32(out[0]), nil
}

func (e *Instance) free(ctx context.Context, p uint32) {
	if e.mod != nil {
		e.mod.ExportedFunction("ls_free").Call(withState(ctx, e.st), uint64(p))
	}
}
