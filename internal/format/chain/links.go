package chain

import "fmt"

// Contract says what the variant replaces with what: its scheme and
// policy, the sealed manifest that lists every replaced tensor (or the
// GGUF file whose weights run), and how many matrices it stores in each
// scheme. It names the inventory of the checkpoint the variant was made
// from.
type Contract struct {
	Format    string `json:"format"`
	Inventory string `json:"inventory_sha256"`
	Variant   string `json:"variant"` // f32, q8, q6, q4, a directory's or GGUF file's name
	// Scheme is the variant's scheme (f32 for the checkpoint itself, gguf
	// for a llama.cpp file, a hub-quantized checkpoint's format).
	Scheme   string `json:"scheme"`
	Policy   string `json:"policy,omitempty"`          // the quantize flags, when not every matrix
	Manifest string `json:"manifest_sha256,omitempty"` // the variant manifest's seal
	GGUF     string `json:"gguf_sha256,omitempty"`
	// Hub is a hub-quantized checkpoint's fingerprint (Scheme then names
	// its format: "gptq 4-bit g128 sym").
	Hub string `json:"hub_sha256,omitempty"`
	// Replaced counts the tensors the variant stores in each scheme in
	// place of the checkpoint's (f32 ones are Untouched's to prove).
	Replaced map[string]int `json:"replaced,omitempty"`
	Seal     string         `json:"seal"`
}

func (*Contract) name() string      { return "contract" }
func (*Contract) format() string    { return ContractFormat }
func (l *Contract) sealed() *string { return &l.Seal }
func (l *Contract) header() *string { return &l.Format }

// Check compares the recorded contract with local's (the variant as it is
// now), naming the field that differs.
func (c *Contract) Check(local *Contract) error {
	for _, f := range []struct{ field, want, got string }{
		{"variant", c.Variant, local.Variant},
		{"scheme", c.Scheme, local.Scheme},
		{"policy", c.Policy, local.Policy},
		{"manifest_sha256", c.Manifest, local.Manifest},
		{"gguf_sha256", c.GGUF, local.GGUF},
		{"hub_sha256", c.Hub, local.Hub},
	} {
		if f.want != f.got {
			return fmt.Errorf("contract: %s %q != %q (the local variant's)", f.field, f.want, f.got)
		}
	}
	return nil
}

// Checkpoint is the checkpoint identity: which files (the inventory's
// seal) run as which variant (the contract's), the fingerprint the
// inventory implies (the receipts' model_sha256), and the proof that the
// tensors the variant keeps are the checkpoint's own (Untouched's seal).
type Checkpoint struct {
	Format       string `json:"format"`
	Inventory    string `json:"inventory_sha256"`
	Contract     string `json:"contract_sha256"`
	Untouched    string `json:"untouched_sha256,omitempty"`
	Model        string `json:"model_sha256"`
	Architecture string `json:"architecture,omitempty"`
	Vocab        int    `json:"vocab,omitempty"`
	Seal         string `json:"seal"`
}

func (*Checkpoint) name() string      { return "checkpoint" }
func (*Checkpoint) format() string    { return CheckpointFormat }
func (l *Checkpoint) sealed() *string { return &l.Seal }
func (l *Checkpoint) header() *string { return &l.Format }

// implied checks that model_sha256 is the fingerprint of inv's files.
func (c *Checkpoint) implied(inv *Inventory) error {
	if fp := inv.Fingerprint(); c.Model != fp {
		return fmt.Errorf("checkpoint: model_sha256 %s, but the inventory's files fingerprint to %s", short(c.Model), short(fp))
	}
	return nil
}

// Backend is what ran the checkpoint: runtime (native, wasm), device or
// adapter as receipts name it, the activations, and the versions of
// logitscope, Go, gogpu/wgpu and wazero (and engine.wasm's sha256 when it
// ran), so that two captures that differ only in their machine say so.
type Backend struct {
	Format      string `json:"format"`
	Checkpoint  string `json:"checkpoint_sha256"`
	Runtime     string `json:"runtime"`
	Device      string `json:"device"`
	Activations string `json:"activations,omitempty"`
	Logitscope  string `json:"logitscope"`
	Go          string `json:"go"`
	WGPU        string `json:"wgpu,omitempty"`
	Wazero      string `json:"wazero,omitempty"`
	Engine      string `json:"engine_wasm_sha256,omitempty"`
	// LlamaCpp is the llama.cpp context that ran the rows (runtime
	// llama.cpp): every setting that changes its numbers.
	LlamaCpp *LlamaCpp `json:"llama_cpp,omitempty"`
	Seal     string    `json:"seal"`
}

// LlamaCpp is what a llama.cpp context ran with, as the context took it
// (flash attention resolved: auto becomes on or off), and the library
// that ran it.
type LlamaCpp struct {
	Build        string `json:"build"`   // cpu or vulkan
	Package      string `json:"package"` // the npm package of the prebuilt library, name@version
	Source       string `json:"source"`  // the llama.cpp commit the library was built from
	Device       string `json:"device"`  // the ggml device: name and description
	FlashAttn    string `json:"flash_attn"`
	FlashAsked   string `json:"flash_attn_asked"`
	TypeK        string `json:"type_k"` // the KV cache's types
	TypeV        string `json:"type_v"`
	Threads      int    `json:"threads"`
	ThreadsBatch int    `json:"threads_batch"`
	Ctx          int    `json:"ctx"`
	Batch        int    `json:"batch"`  // tokens per llama_decode
	UBatch       int    `json:"ubatch"` // tokens per graph
	System       string `json:"system"` // llama_print_system_info: the CPU features ggml uses
}

func (*Backend) name() string      { return "backend" }
func (*Backend) format() string    { return BackendFormat }
func (l *Backend) sealed() *string { return &l.Seal }
func (l *Backend) header() *string { return &l.Format }
