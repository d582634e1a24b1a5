// Package chaintest gives tests a sealed chain whose links name each
// other, for receipts that must verify without a checkpoint on disk.
package chaintest

import (
	"strings"
	"testing"

	"logitscope/internal/format/chain"
)

// Chain is a sealed chain of an f32 capture on the CPU of a one-shard
// checkpoint, carrying panel (sealed here; nil: no panel).
func Chain(tb testing.TB, panel *chain.Panel) *chain.Chain {
	tb.Helper()
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	inv := &chain.Inventory{Config: chain.File{Name: "config.json", Bytes: 2, SHA256: strings.Repeat("c", 64)},
		Shards: []chain.File{{Name: "model.safetensors", Bytes: 8, SHA256: strings.Repeat("1", 64)}}}
	must(chain.Seal(inv))
	ct := &chain.Contract{Inventory: inv.Seal, Variant: "f32", Scheme: "f32"}
	must(chain.Seal(ct))
	ck := &chain.Checkpoint{Inventory: inv.Seal, Contract: ct.Seal, Model: inv.Fingerprint()}
	must(chain.Seal(ck))
	be := &chain.Backend{Checkpoint: ck.Seal, Runtime: "native", Device: "cpu", Logitscope: "devel", Go: "go"}
	must(chain.Seal(be))
	if panel != nil {
		must(chain.Seal(panel))
	}
	return &chain.Chain{Inventory: inv, Contract: ct, Checkpoint: ck, Backend: be, Panel: panel}
}
