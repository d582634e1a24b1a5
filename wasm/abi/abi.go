// Package abi holds the JSON messages of engine.wasm's exports (see
// wasm/ABI.md), shared by the guest and the Go host so both spell them
// the same.
package abi

// Open is ls_open's JSON.
type Open struct {
	Model    string `json:"model"`
	Variant  string `json:"variant"`
	Capacity int    `json:"capacity"`
	// Device is "gpu" (absent or "": the gpu imports) or "cpu": the guest
	// computes in its own memory and calls no gpu import.
	Device string `json:"device,omitempty"`
}

// Request is ls_request's JSON.
type Request struct {
	Mode      string  `json:"mode"` // greedy | forced | panel
	PromptIDs []int   `json:"prompt_ids,omitempty"`
	Text      *string `json:"text,omitempty"`   // greedy: a user turn templated with ChatML
	System    *string `json:"system,omitempty"` // with text; absent: the default system prompt
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
}
