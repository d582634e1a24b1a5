package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/logitdir"
	"logitscope/internal/format/receipt"
	"logitscope/internal/run/capture"
	"logitscope/internal/run/session"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// verifyCommand checks a capture's chain: what its receipt says by
// itself (every link's seal and parents, each window against the panel
// receipt, the window files' sha256: what report checks too), and with
// --model the local files it names (the inventory's shards, config and
// index, the variant's contract, the proof that kept tensors are the
// checkpoint's), with --panel the panel file. The first change found is
// refused naming its link.
func verifyCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stdout)
	modelDir := fs.String("model", "", "the checkpoint to check the inventory, contract and untouched proof against (default: none; the receipt alone is checked)")
	variantName := fs.String("variant", "", "the variant to check the contract against (default: the contract's own, f32, q8, q6 or q4; a directory or GGUF file must be named)")
	panelPath := fs.String("panel", "", "the panel file to check the panel receipt against")
	window := fs.Int("window", 128, "tokens per window when --panel is text")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("want one capture: a windowed capture's directory (or its shards' DIR,DIR…) or a dump with its receipt, got %d arguments", len(pos))
	}
	ch, name, err := recordedChain(pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "receipt: %s: sealed, its chain's links sealed and named by their children, its logits the files it lists\n", name)
	var ck *checkpoint.Checkpoint
	if *modelDir != "" {
		if ck, err = openModel(*modelDir, stderr); err != nil {
			return err
		}
		defer ck.Close()
		if err := verifyModel(ck, ch, *variantName, stdout); err != nil {
			return err
		}
	}
	if *panelPath != "" {
		if err := verifyPanel(ck, ch, *panelPath, *window); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "panel: %s: %d windows, each the panel receipt's (tokens, mask, document, domain, role)\n", *panelPath, len(ch.Panel.Windows))
	}
	fmt.Fprintln(stdout, "verified")
	return nil
}

// recordedChain reads a capture's receipt (a windowed capture's shards,
// or a dump's), checking everything it says by itself.
func recordedChain(arg string) (*chain.Chain, string, error) {
	dirs := strings.Split(arg, ",")
	if logitdir.IsCapture(dirs[0]) {
		c, err := logitdir.Open(dirs...)
		if err != nil {
			return nil, "", err
		}
		// Open refused shards of different chains.
		if c.Receipts[0].Chain == nil {
			return nil, "", fmt.Errorf("%s: the capture receipt has no chain (made before logitscope recorded one)", dirs[0])
		}
		return c.Receipts[0].Chain, arg, nil
	}
	s, err := openSide(arg, false)
	if err != nil {
		return nil, "", err
	}
	s.rows.Close()
	switch {
	case s.Receipt == nil:
		return nil, "", fmt.Errorf("%s: no receipt beside it (%s)", arg, receipt.Path(arg))
	case s.Receipt.Chain == nil:
		return nil, "", fmt.Errorf("%s: the receipt has no chain (made before logitscope recorded one)", receipt.Path(arg))
	}
	return s.Receipt.Chain, receipt.Path(arg), nil
}

// verifyModel checks the recorded chain against ck's files as they are
// now: the inventory first (a shard byte, the config, the index), then
// the contract (the variant as it opens now), then the untouched proof,
// recomputed.
func verifyModel(ck *checkpoint.Checkpoint, ch *chain.Chain, variantName string, stdout io.Writer) error {
	inv, err := chain.InventoryOf(ck)
	if err != nil {
		return err
	}
	if err := ch.Inventory.Check(inv); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "inventory: %s: config, %s and %d shards as recorded\n", ck.Source(), indexName(inv), len(inv.Shards))
	if variantName == "" {
		variantName = ch.Contract.Variant
	}
	local, err := capture.Identify(ck, variantName, capture.Options{})
	if err != nil {
		return err
	}
	if err := ch.Contract.Check(local.Contract); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "contract: %s (%s%s) as recorded\n", ch.Contract.Variant, ch.Contract.Scheme, replaced(ch.Contract))
	switch {
	case ch.Untouched == nil && local.Untouched != nil:
		return fmt.Errorf("untouched: the local variant keeps %d pieces in float32, the chain proves none", len(local.Untouched.Tensors))
	case ch.Untouched != nil:
		if local.Untouched == nil {
			return fmt.Errorf("untouched: the chain proves %d kept pieces, the local weights keep none", len(ch.Untouched.Tensors))
		}
		if err := ch.Untouched.Compare(local.Untouched); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "untouched: %d pieces kept in float32, each the checkpoint's bytes (recomputed)\n", len(ch.Untouched.Tensors))
	}
	if local.Checkpoint.Model != ch.Checkpoint.Model {
		return fmt.Errorf("checkpoint: model_sha256 %.12s…, the local checkpoint's is %.12s…", ch.Checkpoint.Model, local.Checkpoint.Model)
	}
	return nil
}

func indexName(inv *chain.Inventory) string {
	if inv.Index == nil {
		return "no index"
	}
	return inv.Index.Name
}

func replaced(c *chain.Contract) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(c.Replaced)) {
		parts = append(parts, fmt.Sprintf("%d tensors in %s", c.Replaced[s], s))
	}
	if c.Policy != "" {
		parts = append(parts, c.Policy)
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

// verifyPanel reads the panel as a capture would (a text panel needs the
// model's tokenizer) and checks it against the chain's panel receipt.
func verifyPanel(ck *checkpoint.Checkpoint, ch *chain.Chain, path string, window int) error {
	if ch.Panel == nil {
		return fmt.Errorf("panel: the chain has no panel receipt: the capture did not run a panel")
	}
	var tok *tokenizer.Tokenizer
	var prefix []int
	if !strings.HasSuffix(path, ".jsonl") {
		if ck == nil {
			return fmt.Errorf("--panel %s: a text panel is cut into windows by the model's tokenizer: give --model", path)
		}
		var err error
		if tok, err = tokenizer.Load(ck.TokenizerPath()); err != nil {
			return err
		}
		tmpl, err := chat.ConfigBeside(ck.TokenizerPath())
		if err != nil {
			return err
		}
		prefix = chat.RawPrefix(tok, tmpl)
	}
	p, err := session.ReadPanelFile(path, tok, window, prefix)
	if err != nil {
		return err
	}
	return ch.Panel.Check(p.Receipt)
}

// inventoryCommand prints the sealed inventory of a checkpoint's files,
// which capture --inventory checks a run's local files against.
func inventoryCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inventory", stdout)
	modelDir := fs.String("model", "", "model directory, hub cache folder or GGUF file; default $LOGITSCOPE_MODEL, else the synthetic tiny preset")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	ck, err := openModel(*modelDir, stderr)
	if err != nil {
		return err
	}
	defer ck.Close()
	inv, err := chain.InventoryOf(ck)
	if err != nil {
		return err
	}
	return printJSON(stdout, inv)
}

// panelCommand seals a .jsonl panel: it writes PANEL.receipt.json beside
// it (every window's token and mask hashes, ids, document, domain and
// role), which every later read of the panel checks, and prints its
// windows and prediction positions by domain and role.
func panelCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("panel", stdout)
	force := fs.Bool("force", false, "replace a receipt already beside the panel")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || !strings.HasSuffix(pos[0], ".jsonl") {
		return fmt.Errorf("want one .jsonl panel (a text panel's windows depend on the model's tokenizer: its capture derives their receipt), got %q", pos)
	}
	path, rpath := pos[0], chain.PanelPath(pos[0])
	if err := checkOutput(rpath, *force); err != nil {
		return err
	}
	p, err := session.ReadPanelFile(path, nil, 0, nil)
	if err != nil {
		return err
	}
	if err := chain.WritePanel(rpath, p.Receipt); err != nil {
		return err
	}
	count := map[string]map[string][2]int{"domain": {}, "role": {}}
	for _, w := range p.Receipt.Windows {
		for by, key := range map[string]string{"domain": w.Domain, "role": w.Role} {
			c := count[by][key]
			count[by][key] = [2]int{c[0] + 1, c[1] + w.PredictionPositions}
		}
	}
	fmt.Fprintf(stdout, "panel: %s: %d windows\n", path, len(p.Windows))
	for _, by := range []string{"domain", "role"} {
		for _, key := range slices.Sorted(maps.Keys(count[by])) {
			label := key
			if label == "" {
				label = "(none)"
			}
			fmt.Fprintf(stdout, "  %s %-16s %5d windows %8d prediction positions\n", by, label, count[by][key][0], count[by][key][1])
		}
	}
	fmt.Fprintf(stdout, "receipt: %s (seal %s)\n", rpath, p.Receipt.Seal)
	return nil
}

// chainLine says in a report's header what a side's chain verified: its
// checkpoint identity, variant contract, kept tensors proved and backend;
// nothing for a side whose receipt has no chain.
func chainLine(w io.Writer, side string, c *chain.Chain) {
	if c == nil {
		return
	}
	kept := ""
	if c.Untouched != nil {
		kept = fmt.Sprintf(", %d kept pieces proved the checkpoint's", len(c.Untouched.Tensors))
	}
	fmt.Fprintf(w, "%s chain: checkpoint %.12s… (%d shards), %s (%s%s)%s, %s %s, links verified\n",
		side, c.Checkpoint.Seal, len(c.Inventory.Shards), c.Contract.Variant, c.Contract.Scheme, replaced(c.Contract), kept, c.Backend.Runtime, c.Backend.Device)
}
