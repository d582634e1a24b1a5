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
	"logitscope/cpu"
	"logitscope/dump"
	"logitscope/generate"
	"logitscope/model"
	"logitscope/synth"
	"logitscope/tokenizer"
)

// defaultStops are Qwen's <|im_end|> and <|endoftext|>, used when the
// model has no generation_config.json eos ids.
var defaultStops = []int{151645, 151643}

// capture decodes greedily and dumps every logit row, printing the lines
// that capture scripts over transformers print.
func capture(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelDir := fs.String("model", "", "model directory or hub cache folder; default $LOGITSCOPE_MODEL, else the demo model")
	system := fs.String("system", tokenizer.DefaultSystem, "system prompt (empty: no system turn)")
	maxNew := fs.Int("max-new", 8, "most tokens to generate")
	stops := &idList{ids: defaultStops}
	fs.Var(stops, "stop", "stop token ids (default: generation_config.json's eos ids, else 151645 151643)")
	dumpPath := fs.String("dump-logits", "", "logit dump to write (required)")
	idsPath := fs.String("prompt-ids", "", `write the templated prompt's ids as {"ids": [...]} to FILE, or - for stdout`)
	pos, err := parse(fs, takeIDs(args, "stop"))
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return fmt.Errorf("want exactly one PROMPT argument, got %d", len(pos))
	case *dumpPath == "":
		return fmt.Errorf("--dump-logits FILE is required")
	case *maxNew < 1:
		return fmt.Errorf("--max-new %d: must be at least 1", *maxNew)
	}

	dir, err := modelPath(*modelDir)
	if err != nil {
		return err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return err
	}
	m, err := model.Load(ck, loadProgress(stderr))
	if err != nil {
		return err
	}
	if !stops.set && len(m.EOSFromCfg) > 0 {
		stops.ids = m.EOSFromCfg
	}

	prompt := tok.Encode(tokenizer.ChatML(chatTurns(*system, pos[0]), true))
	if *idsPath != "" {
		if err := writeIDs(*idsPath, prompt, stdout); err != nil {
			return err
		}
	}
	if len(prompt)+*maxNew > m.MaxPos {
		return fmt.Errorf("prompt of %d tokens + --max-new %d exceeds %s's context of %d tokens",
			len(prompt), *maxNew, dir, m.MaxPos)
	}
	start := time.Now()
	state, err := cpu.New(m, len(prompt)+*maxNew)
	if err != nil {
		return err
	}
	res, err := generate.Greedy(state, prompt, *maxNew, stops.ids)
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()

	logits := &dump.Logits{Rows: len(res.Rows), Vocab: m.Vocab, Data: make([]float32, 0, len(res.Rows)*m.Vocab)}
	for _, r := range res.Rows {
		logits.Data = append(logits.Data, r...)
	}
	if err := dump.WriteFile(*dumpPath, logits); err != nil {
		return err
	}
	text := res.Output
	if res.Stopped {
		text = text[:len(text)-1]
	}
	stopped := 0
	if res.Stopped {
		stopped = 1
	}
	fmt.Fprintf(stdout, "prompt_tokens: %d\n", len(prompt))
	fmt.Fprintf(stdout, "output_ids: %s\n", idsString(res.Output))
	fmt.Fprintf(stdout, "stop_reason: %d\n", stopped)
	fmt.Fprintf(stdout, "wall_time_seconds: %.3f\n", wall)
	fmt.Fprintf(stdout, "logit_rows_dumped: %d rows x %d vocab -> %s\n", logits.Rows, logits.Vocab, *dumpPath)
	fmt.Fprintln(stdout, "---DECODED---")
	fmt.Fprintln(stdout, tok.Decode(text, false))
	return nil
}

// loadProgress reports weight loading on the terminal, at most every 5%.
func loadProgress(w io.Writer) func(done, total int64) {
	last := int64(-1)
	return func(done, total int64) {
		if pct := done * 100 / max(total, 1); pct/5 != last/5 || done == total {
			last = pct
			fmt.Fprintf(w, "\rloading weights: %3d%% (%d / %d MB)", pct, done>>20, total>>20)
			if done == total {
				fmt.Fprintln(w)
			}
		}
	}
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
