package chain

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// sample is a sealed chain of every link, as a capture of an experts-only
// variant over a two-window panel records it.
func sample(t testing.TB) *Chain {
	t.Helper()
	inv := &Inventory{
		Config: File{Name: "config.json", Bytes: 700, SHA256: strings.Repeat("c", 64)},
		Index:  &File{Name: "model.safetensors.index.json", Bytes: 900, SHA256: strings.Repeat("d", 64)},
		Shards: []File{
			{Name: "model-00001-of-00002.safetensors", Bytes: 1 << 20, SHA256: strings.Repeat("1", 64)},
			{Name: "model-00002-of-00002.safetensors", Bytes: 2 << 20, SHA256: strings.Repeat("2", 64)},
		},
	}
	must(t, Seal(inv))
	ct := &Contract{Inventory: inv.Seal, Variant: "q4", Scheme: "q4", Policy: `--only "mlp\\.experts\\."`,
		Manifest: strings.Repeat("e", 64), Replaced: map[string]int{"q4": 48}}
	must(t, Seal(ct))
	u := &Untouched{Contract: ct.Seal, Tensors: []Kept{{
		Name: "model.layers.0.self_attn.q_proj.weight", Rows: [2]int{0, 64},
		Official: Span{Shard: "model-00002-of-00002.safetensors", DType: "BF16", Offset: 4096, Length: 8192, SHA256: strings.Repeat("a", 64), F32SHA256: strings.Repeat("b", 64)},
		Loaded:   Span{Shard: "shard-00001.bin", DType: "F32", Offset: 0, Length: 16384, SHA256: strings.Repeat("b", 64)},
	}}}
	must(t, Seal(u))
	ck := &Checkpoint{Inventory: inv.Seal, Contract: ct.Seal, Untouched: u.Seal, Model: inv.Fingerprint(), Architecture: "Qwen3MoeForCausalLM", Vocab: 512}
	must(t, Seal(ck))
	be := &Backend{Checkpoint: ck.Seal, Runtime: "native", Device: "cpu", Logitscope: "devel", Go: "go1.26.8", WGPU: "v0.31.5"}
	must(t, Seal(be))
	p := &Panel{Windows: []PanelWindow{
		{WindowID: "0", DocumentID: "a", Domain: "code", Role: "eval", Tokens: 4, TokenIDsSHA256: IntsSHA256([]int{0, 5, 6, 7}), AttentionMaskSHA256: IntsSHA256([]int{0, 1, 1, 1}), PredictionPositions: 2},
		{WindowID: "1", DocumentID: "b", Domain: "prose", Role: "eval", Tokens: 3, TokenIDsSHA256: IntsSHA256([]int{8, 9, 10}), AttentionMaskSHA256: IntsSHA256([]int{1, 1, 1}), PredictionPositions: 2},
	}}
	must(t, Seal(p))
	return &Chain{Inventory: inv, Contract: ct, Checkpoint: ck, Backend: be, Untouched: u, Panel: p}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every link changed after it was sealed is refused naming it; changed
// and sealed again, it is refused by the link that names it.
func TestChainTamper(t *testing.T) {
	if err := sample(t).Verify(); err != nil {
		t.Fatalf("the sample chain: %v", err)
	}
	tests := []struct {
		name   string
		change func(c *Chain)
		reseal func(c *Chain) link // the link sealed again after the change, nil for none
		want   string
	}{
		{"inventory shard", func(c *Chain) { c.Inventory.Shards[1].SHA256 = strings.Repeat("3", 64) }, nil, "inventory: seal "},
		{"inventory resealed", func(c *Chain) { c.Inventory.Shards[1].SHA256 = strings.Repeat("3", 64) }, func(c *Chain) link { return c.Inventory },
			"contract: inventory_sha256 "},
		{"config resealed", func(c *Chain) { c.Inventory.Config.Bytes++ }, func(c *Chain) link { return c.Inventory }, "contract: inventory_sha256 "},
		{"contract", func(c *Chain) { c.Contract.Policy = "" }, nil, "contract: seal "},
		{"contract resealed", func(c *Chain) { c.Contract.Manifest = strings.Repeat("f", 64) }, func(c *Chain) link { return c.Contract },
			"checkpoint: contract_sha256 "},
		{"checkpoint", func(c *Chain) { c.Checkpoint.Vocab = 513 }, nil, "checkpoint: seal "},
		{"checkpoint resealed", func(c *Chain) { c.Checkpoint.Vocab = 513 }, func(c *Chain) link { return c.Checkpoint }, "backend: checkpoint_sha256 "},
		{"fingerprint", func(c *Chain) {
			c.Checkpoint.Model = strings.Repeat("0", 64)
			must(t, Seal(c.Checkpoint))
			c.Backend.Checkpoint = c.Checkpoint.Seal
		}, func(c *Chain) link { return c.Backend }, "checkpoint: model_sha256 000000000000…, but the inventory's files fingerprint to "},
		{"backend", func(c *Chain) { c.Backend.Device = "gpu: llvmpipe" }, nil, "backend: seal "},
		{"backend format", func(c *Chain) { c.Backend.Format = "logitscope.backend/2" }, nil, `backend: format "logitscope.backend/2"`},
		{"untouched", func(c *Chain) { c.Untouched.Tensors[0].Rows[1] = 65 }, nil, "untouched: seal "},
		{"untouched resealed", func(c *Chain) { c.Untouched.Tensors[0].Loaded.SHA256 = strings.Repeat("9", 64) }, func(c *Chain) link { return c.Untouched },
			"checkpoint: untouched_sha256 "},
		{"untouched bytes", func(c *Chain) {
			c.Untouched.Tensors[0].Loaded.SHA256 = strings.Repeat("9", 64)
			must(t, Seal(c.Untouched))
			c.Checkpoint.Untouched = c.Untouched.Seal
			must(t, Seal(c.Checkpoint))
			c.Backend.Checkpoint = c.Checkpoint.Seal
		}, func(c *Chain) link { return c.Backend }, "untouched: tensor model.layers.0.self_attn.q_proj.weight rows [0, 64): loaded shard-00001.bin [0, 16384) sha256 999999999999… != official"},
		{"untouched shard", func(c *Chain) {
			c.Untouched.Tensors[0].Official.Shard = "model-00003-of-00002.safetensors"
			must(t, Seal(c.Untouched))
			c.Checkpoint.Untouched = c.Untouched.Seal
			must(t, Seal(c.Checkpoint))
			c.Backend.Checkpoint = c.Checkpoint.Seal
		}, func(c *Chain) link { return c.Backend }, "official shard model-00003-of-00002.safetensors is not in the inventory"},
		{"untouched dropped", func(c *Chain) { c.Untouched = nil }, nil, "checkpoint: untouched_sha256 "},
		{"panel", func(c *Chain) { c.Panel.Windows[1].Domain = "code" }, nil, "panel: seal "},
		{"no backend", func(c *Chain) { c.Backend = nil }, nil, "chain: no backend link"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := sample(t)
			tc.change(c)
			if tc.reseal != nil {
				must(t, Seal(tc.reseal(c)))
			}
			err := c.Verify()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// The inventory of the local files is compared file by file.
func TestInventoryCheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(inv *Inventory)
		want   string
	}{
		{"same", func(*Inventory) {}, ""},
		{"a shard byte", func(inv *Inventory) { inv.Shards[1].SHA256 = strings.Repeat("3", 64) },
			"inventory: shard model-00002-of-00002.safetensors: sha256 222222222222… != 333333333333…"},
		{"a shard's size", func(inv *Inventory) { inv.Shards[0].Bytes++ }, "inventory: shard model-00001-of-00002.safetensors: 1048576 bytes != 1048577"},
		{"the config", func(inv *Inventory) { inv.Config.SHA256 = strings.Repeat("4", 64) }, "inventory: config config.json: sha256 cccccccccccc… != 444444444444…"},
		{"the index", func(inv *Inventory) { inv.Index.SHA256 = strings.Repeat("5", 64) }, "inventory: index model.safetensors.index.json: sha256 "},
		{"no index", func(inv *Inventory) { inv.Index = nil }, "inventory: index model.safetensors.index.json is not in the local checkpoint"},
		{"a shard missing", func(inv *Inventory) { inv.Shards = inv.Shards[:1] }, "inventory: shard model-00002-of-00002.safetensors is not in the local checkpoint"},
		{"a shard more", func(inv *Inventory) { inv.Shards = append(inv.Shards, File{Name: "extra.safetensors"}) },
			"inventory: the local checkpoint has shard extra.safetensors, which the inventory does not list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recorded := sample(t).Inventory
			local := sample(t).Inventory
			tc.change(local)
			err := recorded.Check(local)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}

// A recomputed proof that differs names the piece and the side.
func TestUntouchedCompare(t *testing.T) {
	tests := []struct {
		name   string
		change func(u *Untouched)
		want   string
	}{
		{"same", func(*Untouched) {}, ""},
		{"official bytes", func(u *Untouched) { u.Tensors[0].Official.SHA256 = strings.Repeat("7", 64) },
			"untouched: tensor model.layers.0.self_attn.q_proj.weight rows [0, 64): official model-00002-of-00002.safetensors [4096, 12288) sha256 aaaaaaaaaaaa… != 777777777777…"},
		{"loaded bytes", func(u *Untouched) { u.Tensors[0].Loaded.SHA256 = strings.Repeat("7", 64) }, "loaded shard-00001.bin [0, 16384) sha256 bbbbbbbbbbbb… != 777777777777…"},
		{"quantized now", func(u *Untouched) { u.Tensors = nil }, "the local variant does not keep it in float32"},
		{"kept now", func(u *Untouched) { u.Tensors = append(u.Tensors, Kept{Name: "lm_head.weight", Rows: [2]int{0, 1}}) },
			"untouched: tensor lm_head.weight rows [0, 1): the local variant keeps it in float32, the proof does not list it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			local := sample(t).Untouched
			tc.change(local)
			err := sample(t).Untouched.Compare(local)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}

// A chain survives JSON: what a capture receipt carries verifies when read
// back.
func TestChainJSON(t *testing.T) {
	b, err := json.Marshal(sample(t))
	must(t, err)
	var c Chain
	must(t, json.Unmarshal(b, &c))
	must(t, c.Verify())
}

// The seal of a link is the sha256 of its canonical JSON without the seal
// field, as the seed's receipts are sealed (Python's
// sha256(json.dumps(d, sort_keys=True, separators=(",", ":"))) gives the
// same), and a window's ids hash as their JSON array.
func ExampleSeal() {
	inv := &Inventory{Config: File{Name: "config.json", Bytes: 2, SHA256: IntsSHA256(nil)}, Shards: []File{}}
	if err := Seal(inv); err != nil {
		panic(err)
	}
	fmt.Println(inv.Format)
	fmt.Println(inv.Seal)
	fmt.Println(IntsSHA256([]int{1, 2, 3}))
	// Output:
	// logitscope.inventory/1
	// e8cb797ebaab4c095a99324cd4a5b198e5a2526dec08141ec001a34e4c26af83
	// a615eeaee21de5179de080de8c3052c8da901138406ba71c38c032845f7d54f4
}
