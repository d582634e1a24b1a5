package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"logitscope/checkpoint"
	"logitscope/dump"
	"logitscope/receipt"
	"logitscope/session"
	"logitscope/synth"
	"logitscope/tokenizer"
	"logitscope/variant"
)

// defaultStops are Qwen's <|im_end|> and <|endoftext|>, used when the
// model has no generation_config.json eos ids.
var defaultStops = []int{151645, 151643}

// capture runs one request on one variant and dumps every logit row, with
// a sealed receipt beside the dump. Greedy mode prints the lines that
// capture scripts over transformers print.
func capture(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelDir := fs.String("model", "", "model directory or hub cache folder; default $LOGITSCOPE_MODEL, else the demo model")
	variantName := fs.String("variant", "f32", "f32 (the checkpoint itself), q8, q6, q4 (MODEL/variants/SCHEME), or a variant directory")
	system := fs.String("system", tokenizer.DefaultSystem, "system prompt (empty: no system turn)")
	maxNew := fs.Int("max-new", 8, "most tokens to generate")
	stops := &idList{ids: defaultStops}
	fs.Var(stops, "stop", "stop token ids (default: generation_config.json's eos ids, else 151645 151643)")
	dumpPath := fs.String("dump-logits", "", "logit dump to write (required)")
	idsPath := fs.String("prompt-ids", "", `write the templated prompt's ids as {"ids": [...]} to FILE, or - for stdout`)
	panelPath := fs.String("panel", "", "teacher-forced panel instead of a PROMPT: a text file, or .jsonl token-id windows")
	window := fs.Int("window", 128, "tokens per window when --panel is text")
	follow := fs.String("follow", "", "feed back the prompt and output tokens of this dump's receipt (teacher-forced agreement) instead of decoding")
	dryRun := fs.Bool("dry-run", false, "print the plan as JSON and run nothing")
	device := fs.String("device", "auto", "gpu (WebGPU), cpu, or auto: the GPU when an adapter exists")
	runtime := fs.String("runtime", "auto", "wasm (engine.wasm under wazero, on the GPU, or its CPU path with --device cpu), native (the Go engine), or auto: wasm when engine.wasm is built and the GPU is asked for and present")
	enginePath := fs.String("engine", "", "engine.wasm for --runtime wasm (default $LOGITSCOPE_ENGINE, else "+defaultEngine+")")
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
	case *dumpPath == "":
		return fmt.Errorf("--dump-logits FILE is required")
	case *maxNew < 1:
		return fmt.Errorf("--max-new %d: must be at least 1", *maxNew)
	case *window < 2:
		return fmt.Errorf("--window %d: a window needs at least 2 tokens", *window)
	}

	ck, err := openModel(*modelDir)
	if err != nil {
		return err
	}
	defer ck.Close()
	dir := ck.Dir
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return err
	}
	if !stops.set && len(ck.Generation.EOSTokenIDs) > 0 {
		stops.ids = ck.Generation.EOSTokenIDs
	}
	maxPos := ck.Config.MaxPositionEmbeddings

	req := receipt.Request{Mode: session.Greedy, MaxNew: *maxNew, Stops: stops.ids}
	var windows [][]int
	var followed []int // the output tokens a forced capture feeds back
	switch {
	case *follow != "":
		ref, err := readSide(*follow)
		if err != nil {
			return err
		}
		if ref.Receipt == nil || ref.Receipt.Request.Mode == session.Panel {
			return fmt.Errorf("%s: --follow needs a greedy or forced capture with its receipt beside it", *follow)
		}
		req = receipt.Request{Mode: session.Forced, PromptIDs: ref.Receipt.Request.PromptIDs, Stops: ref.Receipt.Request.Stops,
			Follow: ref.Receipt.Dump.SHA256}
		followed = ref.Receipt.OutputIDs
		if len(req.PromptIDs) == 0 {
			return fmt.Errorf("%s: its receipt has no prompt ids to feed back", *follow)
		}
		if len(req.PromptIDs)+len(followed) > maxPos {
			return fmt.Errorf("%s: %d prompt + %d output tokens exceed %s's context of %d tokens",
				*follow, len(req.PromptIDs), len(followed), dir, maxPos)
		}
	case *panelPath != "":
		if windows, err = readPanel(*panelPath, tok, *window); err != nil {
			return err
		}
		req = receipt.Request{Mode: session.Panel, Panel: receipt.PanelSHA256(windows), Windows: len(windows)}
		for i, w := range windows {
			if len(w) > maxPos {
				return fmt.Errorf("%s: window %d has %d tokens, more than %s's context of %d", *panelPath, i+1, len(w), dir, maxPos)
			}
		}
	default:
		req.PromptIDs = tok.Encode(tokenizer.ChatML(tokenizer.Turns(*system, pos[0]), true))
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
	vdir := variantDir(ck.Dir, *variantName)
	if *dryRun {
		return printPlan(stdout, ck, *variantName, vdir, req, windows, *dumpPath)
	}

	fp, err := ck.Fingerprint()
	if err != nil {
		return err
	}
	run := session.Request{Mode: req.Mode, PromptIDs: req.PromptIDs, MaxNew: *maxNew, Stops: req.Stops,
		Outputs: followed, Windows: windows}
	v, err := openVariant(ck, vdir, fp)
	if err != nil {
		return err
	}
	manifest := ""
	if v != nil {
		manifest = v.Manifest.Seal
	}
	var res session.Result
	var deviceName string
	var took time.Duration
	if *runtime == "auto" {
		*runtime = autoRuntime(*enginePath, *device, vdir == "" || vdir == variant.DefaultDir(ck.Dir, *variantName), stderr)
	}
	switch *runtime {
	case "wasm":
		res, deviceName, took, err = runWasm(ck, *variantName, *enginePath, *device, run, stderr)
	case "native":
		var eng engine
		if eng, err = openEngine(ck, v, *device, run.Capacity(), stderr); err != nil {
			return err
		}
		defer eng.Close()
		deviceName = eng.Name()
		start := time.Now()
		res, err = session.Drive(eng, run)
		took = time.Since(start)
	default:
		err = fmt.Errorf("--runtime %q: want native or wasm", *runtime)
	}
	if err != nil {
		return err
	}
	wall := took.Seconds()

	vocab := ck.Config.VocabSize
	logits := &dump.Logits{Rows: len(res.Rows), Vocab: vocab, Data: make([]float32, 0, len(res.Rows)*vocab)}
	for _, r := range res.Rows {
		logits.Data = append(logits.Data, r...)
	}
	if err := dump.WriteFile(*dumpPath, logits); err != nil {
		return err
	}
	sum, err := checkpoint.FileSHA256(*dumpPath)
	if err != nil {
		return err
	}
	rc := &receipt.Receipt{
		Version: receipt.Version(), Model: fp, Variant: variantLabel(*variantName), VariantManifest: manifest,
		Device: deviceName, Request: req, OutputIDs: res.Output, Targets: res.Targets,
		Dump: receipt.Dump{SHA256: sum, Rows: logits.Rows, Vocab: logits.Vocab},
	}
	if err := receipt.Write(receipt.Path(*dumpPath), rc); err != nil {
		return err
	}

	switch req.Mode {
	case session.Panel:
		fmt.Fprintf(stdout, "panel_windows: %d\n", len(windows))
		fmt.Fprintf(stdout, "panel_tokens: %d\n", len(res.Targets)+len(windows))
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
	fmt.Fprintf(stdout, "wall_time_seconds: %.3f\n", wall)
	fmt.Fprintf(stdout, "logit_rows_dumped: %d rows x %d vocab -> %s\n", logits.Rows, logits.Vocab, *dumpPath)
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

func printPlan(w io.Writer, ck *checkpoint.Checkpoint, name, vdir string, req receipt.Request, windows [][]int, dumpPath string) error {
	plan := map[string]any{
		"model": ck.Dir, "architecture": ck.Config.Arch(), "variant": variantLabel(name), "device": "cpu",
		"request": req, "dump": dumpPath, "receipt": receipt.Path(dumpPath),
	}
	if vdir != "" {
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

// openModel opens the checkpoint that modelPath names.
func openModel(flagValue string) (*checkpoint.Checkpoint, error) {
	dir, err := modelPath(flagValue)
	if err != nil {
		return nil, err
	}
	return checkpoint.Open(dir)
}

// modelPath is the --model flag, else $LOGITSCOPE_MODEL, else the demo.
func modelPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if env := os.Getenv("LOGITSCOPE_MODEL"); env != "" {
		return env, nil
	}
	return synth.Demo()
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
