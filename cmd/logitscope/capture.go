package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"logitscope/internal/engine"
	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/logitdir"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/hub"
	"logitscope/internal/model/synth"
	"logitscope/internal/run/capture"
	"logitscope/internal/run/session"
	"logitscope/internal/sys/progress"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// maxPromptBytes bounds a prompt read from stdin.
const maxPromptBytes = 64 << 20

// captureCommand runs one request on one variant and dumps every logit
// row, with a sealed receipt beside the dump. Greedy mode prints the lines that
// capture scripts over transformers print.
func captureCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("capture", stdout)
	modelDir := fs.String("model", "", "model directory, hub cache folder, GGUF file or hub id (hf:ORG/NAME[@REV]); default $LOGITSCOPE_MODEL, else the synthetic tiny preset (random weights, not the page's trained demo: --model demo/model names that)")
	variantName := fs.String("variant", "f32", "f32 (the checkpoint itself), q8, q6, q4 (MODEL/variants/SCHEME), a variant directory, or a GGUF file")
	system := fs.String("system", "", "system prompt (empty: no system turn, the chat template's own default if it has one)")
	maxNew := fs.Int("max-new", 8, "most tokens to generate")
	stops := &idList{}
	fs.Var(stops, "stop", "stop token ids (default: generation_config.json's eos ids, else 151645 151643)")
	dumpPath := fs.String("dump-logits", "", "logit dump to write (this or --out is required)")
	force := fs.Bool("force", false, "replace the --dump-logits file (and its receipt) if it exists")
	outDir := fs.String("out", "", "with --panel: a windowed capture in DIR, one safetensors file per window written as it finishes and a sealed capture-receipt.json")
	resume := fs.Bool("resume", false, "with --out: keep the windows already finished in DIR, compute the rest")
	shardFlag := fs.String("shard", "", "with --out: capture only shard i/n of the windows (round-robin); default from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or JOB_COMPLETION_INDEX/LOGITSCOPE_SHARDS, else all")
	idsPath := fs.String("prompt-ids", "", `write the templated prompt's ids as {"ids": [...]} to FILE, or - for stdout`)
	panelPath := fs.String("panel", "", "teacher-forced panel instead of a PROMPT: a text file, .jsonl token-id windows, or llama.cpp's --kl-divergence-base file (its chunks)")
	window := fs.Int("window", 128, "tokens per window when --panel is text")
	follow := fs.String("follow", "", "feed back the prompt and output tokens of this dump's receipt (teacher-forced agreement) instead of decoding")
	dryRun := fs.Bool("dry-run", false, "print the plan as JSON, with every identity of its chain (inventory, contract, checkpoint, backend, panel), and run nothing")
	inventoryPath := fs.String("inventory", "", "the official checkpoint's sealed inventory (logitscope inventory): refuse to run on local files that do not match it")
	device := fs.String("device", "auto", "gpu (WebGPU), cpu, or auto: the GPU when an adapter exists")
	runtime := fs.String("runtime", "auto", "wasm (engine.wasm under wazero, on the GPU, or its CPU path with --device cpu), native (the Go engine), llama.cpp[:cpu|:vulkan] (llama.cpp's own library on a GGUF file, the engine a user ships), or auto: wasm when engine.wasm is built and the GPU is asked for and present")
	llama := llamaFlags(fs)
	acts := fs.String("activations", engine.ActsF32, "how products with quantized weights take their activations: f32, or q8 (rounded to 8-bit blocks first, as llama.cpp's CPU backend does for its quantized types; native engine, CPU or GPU); with a hub-quantized --variant also int8, fp8 or fp4 per token as vLLM's kernels round them, or format: as each matrix's checkpoint declares (native engine)")
	enginePath := fs.String("engine", "", "engine.wasm for --runtime wasm (default $LOGITSCOPE_ENGINE, else "+capture.DefaultEngine+")")
	pos, err := parse(fs, takeIDs(args, "stop"))
	if err != nil {
		return err
	}
	switch {
	case *panelPath != "" && *follow != "":
		return fmt.Errorf("--panel and --follow are two different requests: give one")
	case *panelPath == "" && *follow == "" && len(pos) != 1:
		return fmt.Errorf("want exactly one PROMPT argument (or --panel FILE, or --follow DUMP), got %d", len(pos))
	case (*panelPath != "" || *follow != "") && len(pos) != 0:
		return fmt.Errorf("--panel and --follow take no PROMPT argument, got %q", pos[0])
	case *outDir != "" && *dumpPath != "":
		return fmt.Errorf("--out DIR and --dump-logits FILE are two ways to save a capture: give one")
	case *outDir != "" && *panelPath == "":
		return fmt.Errorf("--out DIR saves a panel window by window: it needs --panel")
	case *outDir == "" && (*resume || *shardFlag != ""):
		return fmt.Errorf("--resume and --shard are for a windowed capture: give --out DIR")
	case *dumpPath == "" && *outDir == "":
		return fmt.Errorf("--dump-logits FILE is required")
	case *maxNew < 1:
		return fmt.Errorf("--max-new %d: must be at least 1", *maxNew)
	case *window < 2:
		return fmt.Errorf("--window %d: a window needs at least 2 tokens", *window)
	}
	if *dumpPath != "" && !*dryRun {
		for _, p := range []string{*dumpPath, receipt.Path(*dumpPath)} {
			if err := checkOutput(p, *force); err != nil {
				return err
			}
		}
	}

	ck, err := openModel(*modelDir, stderr)
	if err != nil {
		return err
	}
	defer ck.Close()
	dir := ck.Source()
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return err
	}
	// The checkpoint's own chat template and BOS, as transformers applies
	// them.
	tmpl, err := chat.ConfigBeside(ck.TokenizerPath())
	if err != nil {
		return err
	}
	if !stops.set {
		stops.ids = session.Stops(ck.Generation)
	}
	maxPos := ck.Config.MaxPositionEmbeddings

	req := session.Request{Mode: session.Greedy, MaxNew: *maxNew, Stops: stops.ids}
	followed := "" // the sha256 of the dump a forced capture feeds back
	var panel *chain.Panel
	prompt := "" // the rendered chat prompt, for the receipt
	switch {
	case *follow != "":
		ref, err := openSide(*follow, false)
		if err != nil {
			return err
		}
		ref.rows.Close() // the receipt is what is followed; the rows were checked by its hash
		if ref.Receipt == nil || ref.Receipt.Request.Mode == session.Panel {
			return fmt.Errorf("%s: --follow needs a greedy or forced capture with its receipt beside it", *follow)
		}
		req = session.Request{Mode: session.Forced, PromptIDs: ref.Receipt.Request.PromptIDs, Stops: ref.Receipt.Request.Stops,
			Outputs: ref.Receipt.OutputIDs}
		followed = ref.Receipt.Dump.SHA256
		prompt = ref.Receipt.Request.Prompt
		if len(req.PromptIDs) == 0 {
			return fmt.Errorf("%s: its receipt has no prompt ids to feed back", *follow)
		}
		if len(req.PromptIDs)+len(req.Outputs) > maxPos {
			return fmt.Errorf("%s: %d prompt + %d output tokens exceed %s's context of %d tokens",
				*follow, len(req.PromptIDs), len(req.Outputs), dir, maxPos)
		}
	case *panelPath != "":
		p, prefix, err := readPanel(ck, tok, tmpl, *panelPath, *window)
		if err != nil {
			return err
		}
		req = session.Request{Mode: session.Panel, Windows: p.Tokens(), Prefix: prefix}
		panel = p.Receipt
	default:
		user := pos[0]
		if user == "-" { // as cat and most tools read it: the prompt from stdin
			b, err := io.ReadAll(io.LimitReader(os.Stdin, maxPromptBytes+1))
			if err != nil {
				return fmt.Errorf("reading the prompt from stdin: %v", err)
			}
			if len(b) > maxPromptBytes {
				return fmt.Errorf("the prompt on stdin is longer than %d bytes", maxPromptBytes)
			}
			user = string(b)
		}
		// The rendered text carries its BOS, so nothing is added on encoding.
		if prompt, err = chat.Render(tmpl, tokenizer.Turns(*system, user), true); err != nil {
			return err
		}
		req.PromptIDs = tok.Encode(prompt)
		if *idsPath != "" {
			if err := writeIDs(*idsPath, req.PromptIDs, stdout); err != nil {
				return err
			}
		}
		if len(req.PromptIDs)+*maxNew > maxPos {
			return fmt.Errorf("prompt of %d tokens + --max-new %d exceeds %s's context of %d tokens",
				len(req.PromptIDs), *maxNew, dir, maxPos)
		}
	}
	rq := capture.ReceiptRequest(req, followed)
	rq.Prompt = prompt
	opt := capture.Options{Device: *device, Runtime: *runtime, Engine: *enginePath, Activations: *acts, Log: stderr, Progress: progress.New(stderr), Panel: panel,
		LlamaCpp: *llama}
	if panel != nil {
		rq.PanelReceipt = panel.Seal
	}
	if *inventoryPath != "" {
		if opt.Inventory, err = chain.ReadInventory(*inventoryPath); err != nil {
			return err
		}
	}
	if *dryRun {
		return printPlan(stdout, ck, *variantName, opt, rq, req.Windows, *dumpPath, *outDir)
	}
	if *outDir != "" {
		shard, from, err := shardOf(*shardFlag)
		if err != nil {
			return err
		}
		if from != "" && from != "--shard" {
			fmt.Fprintf(stderr, "shard: %s (%s)\n", shard, from)
		}
		return captureWindows(ck, *variantName, req, opt, *outDir, *resume, shard, stdout)
	}
	c, err := capture.Run(ck, *variantName, req, opt)
	if err != nil {
		return err
	}
	if _, err := capture.Save(*dumpPath, ck, rq, c); err != nil {
		return err
	}
	if c.Routes != nil && !dump.IsSafetensors(*dumpPath) {
		fmt.Fprintf(stderr, "note: %s is a binary dump, which has no room for the experts each row was routed to (%s): "+
			"give --dump-logits a .safetensors name to keep them\n", *dumpPath, c.Routing)
	}

	res := c.Result
	rows, vocab := len(res.Rows), ck.Config.VocabSize
	switch req.Mode {
	case session.Panel:
		fmt.Fprintf(stdout, "panel_windows: %d\n", len(req.Windows))
		fmt.Fprintf(stdout, "panel_tokens: %d\n", len(res.Targets)+len(req.Windows))
	case session.Forced:
		fmt.Fprintf(stdout, "prompt_tokens: %d\n", len(req.PromptIDs))
		fmt.Fprintf(stdout, "output_ids: %s\n", idsString(res.Output))
		fmt.Fprintf(stdout, "argmax_ids: %s\n", idsString(res.Argmax))
		fmt.Fprintf(stdout, "first_disagreement: %d\n", firstDifference(res.Output, res.Argmax))
	default:
		fmt.Fprintf(stdout, "prompt_tokens: %d\n", len(req.PromptIDs))
		fmt.Fprintf(stdout, "output_ids: %s\n", idsString(res.Output))
		fmt.Fprintf(stdout, "stop_reason: %d\n", boolInt(res.Stopped))
	}
	fmt.Fprintf(stdout, "wall_time_seconds: %.3f\n", c.Took.Seconds())
	fmt.Fprintf(stdout, "logit_rows_dumped: %d rows x %d vocab -> %s\n", rows, vocab, *dumpPath)
	if c.Routes != nil && dump.IsSafetensors(*dumpPath) {
		fmt.Fprintf(stdout, "routes_dumped: %d rows x %d sparse layers x top-%d of %d experts -> %s\n",
			len(c.Routes), len(c.Routing.Layers), c.Routing.TopK, c.Routing.Experts, *dumpPath)
	}
	if req.Mode != session.Panel {
		text := res.Output
		if res.Stopped {
			text = text[:len(text)-1]
		}
		fmt.Fprintln(stdout, "---DECODED---")
		fmt.Fprintln(stdout, tok.Decode(text, false))
	}
	return nil
}

// firstDifference is the first index where a and b differ, −1 if none.
func firstDifference(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// printPlan prints what a capture would do, where capture.Run would run
// it (capture.Plan) and every identity of the chain its receipt would
// carry, computing nothing else.
func printPlan(w io.Writer, ck *checkpoint.Checkpoint, name string, opt capture.Options, req receipt.Request, windows [][]int, dumpPath, outDir string) error {
	where, ch, err := capture.Plan(ck, name, opt)
	if err != nil {
		return err
	}
	plan := map[string]any{
		"model": ck.Source(), "architecture": ck.Config.Arch(), "variant": capture.VariantLabel(name),
		"runtime": where.Runtime, "device": where.Device, "request": req, "chain": ch,
	}
	if outDir != "" {
		plan["out"], plan["receipt"] = outDir, filepath.Join(outDir, logitdir.ReceiptName)
	} else {
		plan["dump"], plan["receipt"] = dumpPath, receipt.Path(dumpPath)
	}
	if where.Why != "" {
		plan["why"] = where.Why
	}
	vdir := engine.VariantDir(ck.Dir, name)
	switch {
	case vdir == "" && ck.GGUF != "":
		plan["variant"] = filepath.Base(ck.GGUF) // the model's own weights
	case vdir != "":
		plan["variant_dir"] = vdir
	}
	if windows != nil {
		n := 0
		for _, win := range windows {
			n += len(win) - 1
		}
		plan["rows"] = n
	}
	b, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readPanel reads a panel (session.ReadPanelFile) after the checkpoint's
// BOS prefix, refusing a window whose attended tokens exceed its context.
func readPanel(ck *checkpoint.Checkpoint, tok *tokenizer.Tokenizer, tmpl chat.TemplateConfig, path string, window int) (p *session.PanelFile, prefix []int, err error) {
	prefix = chat.RawPrefix(tok, tmpl)
	if p, err = session.ReadPanelFile(path, tok, window, prefix); err != nil {
		return nil, nil, err
	}
	for _, w := range p.Windows {
		if max := ck.Config.MaxPositionEmbeddings; len(w.Tokens()) > max {
			return nil, nil, fmt.Errorf("%s: window %s has %d tokens, more than %s's context of %d", path, w.ID, len(w.Tokens()), ck.Source(), max)
		}
	}
	return p, prefix, nil
}

// panelOf reads a panel's windows with ck's own tokenizer and BOS prefix.
func panelOf(ck *checkpoint.Checkpoint, path string, window int) ([][]int, error) {
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return nil, err
	}
	tmpl, err := chat.ConfigBeside(ck.TokenizerPath())
	if err != nil {
		return nil, err
	}
	p, _, err := readPanel(ck, tok, tmpl, path, window)
	if err != nil {
		return nil, err
	}
	return p.Tokens(), nil
}

// openModel opens the checkpoint that modelPath names: a Hugging Face
// directory, or a GGUF file as a model by itself (ggufmodel.OpenModel).
func openModel(flagValue string, stderr io.Writer) (*checkpoint.Checkpoint, error) {
	path, err := modelPath(flagValue, stderr)
	if err != nil {
		return nil, err
	}
	if gguf.IsFileName(path) {
		return ggufmodel.OpenModel(path)
	}
	return checkpoint.Open(path)
}

// modelPath is the --model flag, else $LOGITSCOPE_MODEL, else the demo;
// a hub id (hf:ORG/NAME[@REV]) is downloaded into the hub cache first
// (hubModel), saying how on stderr, and is its snapshot's path.
func modelPath(flagValue string, stderr io.Writer) (string, error) {
	path := flagValue
	if path == "" {
		path = os.Getenv("LOGITSCOPE_MODEL")
	}
	switch {
	case path == "":
		p, err := synth.Demo()
		if err == nil {
			// Said, so that nobody takes its noise for a model's.
			fmt.Fprintf(stderr, "model: %s: the synthetic tiny preset, random weights (no --model, no $LOGITSCOPE_MODEL)\n", p)
		}
		return p, err
	case hub.IsID(path):
		return hubModel(path, stderr)
	}
	return path, nil
}

// idsString prints ids as Python prints a list of ints (also valid JSON).
func idsString(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func writeIDs(path string, ids []int, stdout io.Writer) error {
	b, _ := json.Marshal(struct {
		IDs []int `json:"ids"`
	}{nonNil(ids)})
	b = append(b, '\n')
	if path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
