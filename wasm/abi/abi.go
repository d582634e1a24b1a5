// Package abi holds the JSON messages of engine.wasm's exports (see
// wasm/ABI.md), shared by the guest and the Go host so both spell them
// the same.
package abi

import (
	"encoding/binary"
	"fmt"

	"logitscope/internal/format/routing"
)

// Open is ls_open's JSON.
type Open struct {
	Model    string `json:"model"`
	Variant  string `json:"variant"`
	Capacity int    `json:"capacity"`
	// Device is "gpu" (absent or "": the gpu imports) or "cpu": the guest
	// computes in its own memory and calls no gpu import.
	Device string `json:"device,omitempty"`
	// Files are files of the model directory that the host has put in
	// guest memory, by path inside the directory: each the address of an
	// ls_malloc block that holds the whole file. On the CPU path the
	// engine takes its weights from them in place instead of reading a
	// copy, and the blocks become the model's (ls_free no longer frees
	// them). A browser reads the files it holds into guest memory this way
	// without a copy per read in its own heap.
	Files map[string]uint32 `json:"files,omitempty"`
	// Activations is engine.Options.Activations: "" (float32), "f32",
	// "q8", or for a hub quantization's weights "int8", "fp8", "fp4" or
	// "format".
	Activations string `json:"activations,omitempty"`
}

// Request is ls_request's JSON.
type Request struct {
	Mode      string  `json:"mode"` // greedy | forced | panel
	PromptIDs []int   `json:"prompt_ids,omitempty"`
	Text      *string `json:"text,omitempty"`   // greedy: a user turn templated with the checkpoint's chat_template
	System    string  `json:"system,omitempty"` // with text; "": no system turn
	MaxNew    int     `json:"max_new,omitempty"`
	Stops     *[]int  `json:"stops,omitempty"` // absent: generation_config.json's eos ids; []: none
	Windows   [][]int `json:"windows,omitempty"`
	Outputs   []int   `json:"outputs,omitempty"` // forced: fed back after the prompt
}

// Result is ls_result's JSON.
type Result struct {
	Mode      string `json:"mode"`
	PromptIDs []int  `json:"prompt_ids"`
	Output    []int  `json:"output"`
	Stopped   bool   `json:"stopped"`
	Targets   []int  `json:"targets"`
	Rows      int    `json:"rows"`
	Done      bool   `json:"done"`
	// Vocab is how many logits start each row; Routes, for a mixture of
	// experts, labels the expert ids after them (Routes.Width() per row).
	// A host that keeps rows splits them with these.
	Vocab  int             `json:"vocab"`
	Routes *routing.Layout `json:"routes,omitempty"`
}

// Width is how many float32 each row of the request holds: Vocab logits,
// then Routes.Width() expert ids.
func (r Result) Width() int {
	if r.Routes == nil {
		return r.Vocab
	}
	return r.Vocab + r.Routes.Width()
}

// SplitRow splits one row, as a host kept it, into its logits and its
// route ids (nil for a dense model, whose row is its logits).
func (r Result) SplitRow(row []float32) ([]float32, []int32, error) {
	if err := r.checkRow(row); err != nil {
		return nil, nil, err
	}
	return routing.SplitRow(row, r.Vocab)
}

// SplitRows splits the rows a host kept, as engine.wasm wrote them, with
// SplitRow: a dense model's rows stay as they are and have no routes.
func (r Result) SplitRows(rows [][]float32) ([][]float32, [][]int32, error) {
	for i, row := range rows {
		if err := r.checkRow(row); err != nil {
			return nil, nil, fmt.Errorf("row %d: %v", i, err)
		}
	}
	return routing.SplitRows(rows, r.Vocab)
}

// checkRow refuses a row of another width than the result says.
func (r Result) checkRow(row []float32) error {
	switch {
	case r.Vocab < 1:
		return fmt.Errorf("ls_result says %d logits per row (an engine.wasm older than its host? rebuild it)", r.Vocab)
	case len(row) != r.Width():
		return fmt.Errorf("a row of %d values; ls_result says %d logits and %d route ids", len(row), r.Vocab, r.Width()-r.Vocab)
	}
	return nil
}

// RegionSize is the bytes ls_region writes.
const RegionSize = 24

// Region is ls_region's answer: Rows logit rows (Size/Rows/4 float32 each,
// little-endian) at Offset of device buffer Buffer or, with Buffer 0 (the
// guest's CPU path), at guest address Offset.
type Region struct {
	Buffer       uint32
	Offset, Size uint64
	Rows         uint32
}

// Encode writes r as ls_region lays it out: buffer u32 @0, offset u64 @4,
// size u64 @12, rows u32 @20.
func (r Region) Encode(out []byte) {
	binary.LittleEndian.PutUint32(out[0:], r.Buffer)
	binary.LittleEndian.PutUint64(out[4:], r.Offset)
	binary.LittleEndian.PutUint64(out[12:], r.Size)
	binary.LittleEndian.PutUint32(out[20:], r.Rows)
}

// DecodeRegion reads what Encode wrote.
func DecodeRegion(b []byte) Region {
	return Region{
		Buffer: binary.LittleEndian.Uint32(b[0:]),
		Offset: binary.LittleEndian.Uint64(b[4:]),
		Size:   binary.LittleEndian.Uint64(b[12:]),
		Rows:   binary.LittleEndian.Uint32(b[20:]),
	}
}

// ProgressSize is the bytes ls_progress writes.
const ProgressSize = 8

// Progress is ls_progress's answer: of the tokens a request feeds that are
// known before it runs (the prompt; a forced sequence's prompt and outputs
// but the last; every panel window), Done have been submitted so far.
type Progress struct{ Done, Total uint32 }

// Encode writes p as ls_progress lays it out: done u32 @0, total u32 @4.
func (p Progress) Encode(out []byte) {
	binary.LittleEndian.PutUint32(out[0:], p.Done)
	binary.LittleEndian.PutUint32(out[4:], p.Total)
}

// DecodeProgress reads what Encode wrote.
func DecodeProgress(b []byte) Progress {
	return Progress{Done: binary.LittleEndian.Uint32(b[0:]), Total: binary.LittleEndian.Uint32(b[4:])}
}
