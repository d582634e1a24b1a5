package capture

import (
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"

	"logitscope/internal/engine"
	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model"
	"logitscope/internal/quant/variant"
)

// inventory takes the inventory of ck's files, refused when opt.Inventory
// (the official one) does not match them: the first thing a capture
// does, before it opens any weights.
func inventory(ck *checkpoint.Checkpoint, opt Options) (*chain.Inventory, error) {
	inv, err := chain.InventoryOf(ck)
	if err != nil {
		return nil, err
	}
	if opt.Inventory != nil {
		if err := opt.Inventory.Check(inv); err != nil {
			return nil, fmt.Errorf("%s: %v: the local files are not the checkpoint the inventory lists", ck.Source(), err)
		}
	}
	return inv, nil
}

// links builds a capture's chain up to its checkpoint identity on inv:
// the contract of the weights c names (v, the opened variant, or c.GGUF),
// the proof that v's float32 tensors are the checkpoint's, the identity,
// and opt.Panel. The backend comes once the capture has run (backendOf).
func links(ck *checkpoint.Checkpoint, inv *chain.Inventory, c *Capture, v *variant.Variant, opt Options) (*chain.Chain, error) {
	ct := &chain.Contract{Inventory: inv.Seal, Variant: c.Variant, Scheme: variant.SchemeF32}
	switch {
	case c.GGUF != nil:
		ct.Scheme, ct.GGUF = "gguf", c.GGUF.SHA256
	case c.Hub != nil:
		ct.Scheme, ct.Hub = c.Hub.Format, c.Hub.SHA256
	case v != nil:
		m := v.Manifest
		ct.Scheme, ct.Policy, ct.Manifest, ct.Replaced = m.Scheme, m.Policy.String(), m.Seal, v.Replaced()
	}
	if err := chain.Seal(ct); err != nil {
		return nil, err
	}
	ch := &chain.Chain{Inventory: inv, Contract: ct, Panel: opt.Panel}
	fp, err := ck.Fingerprint()
	if err != nil {
		return nil, err
	}
	id := &chain.Checkpoint{Inventory: inv.Seal, Contract: ct.Seal, Model: fp, Architecture: ck.Config.Arch(), Vocab: ck.Config.VocabSize}
	if v != nil {
		if ch.Untouched, err = variant.Untouched(ck, v, ct.Seal); err != nil {
			return nil, err
		}
		id.Untouched = ch.Untouched.Seal
	}
	ch.Checkpoint = id
	return ch, chain.Seal(id)
}

// backendOf is the backend identity of a capture that ran (or would run,
// for a plan) where t says.
func backendOf(id *chain.Checkpoint, t Target, opt Options, llama *chain.LlamaCpp) (*chain.Backend, error) {
	b := &chain.Backend{Checkpoint: id.Seal, Runtime: t.Runtime, Device: t.Device, Activations: opt.Activations,
		Logitscope: receipt.Version(), Go: goruntime.Version(), WGPU: module("github.com/gogpu/wgpu"), LlamaCpp: llama}
	if b.Activations == "" {
		b.Activations = engine.ActsF32
	}
	if t.Runtime == "wasm" {
		b.Wazero = module("github.com/tetratelabs/wazero")
		sum, err := checkpoint.FileSHA256(EnginePath(opt.Engine))
		if err != nil {
			return nil, err
		}
		b.Engine = sum
	}
	return b, chain.Seal(b)
}

// module is the version of a module this binary was built with, "" when
// the build does not say (a test binary may not).
func module(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// Identify is the chain a capture of variantName on ck would carry, up
// to its checkpoint identity (Backend nil): for a plan, and for verifying
// a recorded chain against the files as they are now. A variant that
// fails to open (a shard that is not its manifest's, a manifest changed
// after it was sealed) is the contract's failure, and says so.
func Identify(ck *checkpoint.Checkpoint, variantName string, opt Options) (*chain.Chain, error) {
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Dir, err)
	}
	inv, err := inventory(ck, opt)
	if err != nil {
		return nil, err
	}
	c := &Capture{Variant: VariantLabel(variantName)}
	var eo engine.Options
	if err := openWeights(ck, variantName, g, &eo, c); err != nil {
		return nil, fmt.Errorf("contract: %w", err)
	}
	if w, ok := eo.Quantized.(io.Closer); ok {
		defer w.Close()
	}
	return links(ck, inv, c, eo.Variant, opt)
}

// Plan is a capture's identities before it runs: every link of its chain,
// the backend being where it would run (Where). It opens and verifies the
// weights and hashes the checkpoint's files; it computes nothing else.
func Plan(ck *checkpoint.Checkpoint, variantName string, opt Options) (Target, *chain.Chain, error) {
	t, err := Where(ck, variantName, opt)
	if err != nil {
		return Target{}, nil, err
	}
	ch, err := Identify(ck, variantName, opt)
	if err != nil {
		return Target{}, nil, err
	}
	ch.Backend, err = backendOf(ch.Checkpoint, t, opt, nil)
	return t, ch, err
}
