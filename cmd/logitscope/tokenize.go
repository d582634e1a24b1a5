package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// tokenize reads one text per line (a JSON string or {"text": ...}) and
// writes {"ids": [...]} per line.
func tokenize(args []string, stdout, stderr io.Writer) error {
	return tokenizeFrom(os.Stdin, args, stdout, stderr)
}

func tokenizeFrom(stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", stdout)
	tokPath := fs.String("tokenizer", "", "tokenizer.json")
	modelDir := fs.String("model", "", "model directory (its tokenizer.json), GGUF file (the tokenizer its metadata describes) or hub id (hf:ORG/NAME[@REV]); default $LOGITSCOPE_MODEL or the demo model")
	chatOn := fs.Bool("chat", false, "apply the chat_template of the tokenizer_config.json beside the tokenizer (ChatML when it has none) to system prompt + user turn + generation prompt first")
	system := fs.String("system", "", "system prompt for --chat (empty: no system turn)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q (texts come on stdin)", pos[0])
	}
	if *tokPath != "" && *modelDir != "" {
		return fmt.Errorf("give --tokenizer or --model, not both")
	}
	if *tokPath == "" {
		path, err := modelPath(*modelDir, stderr)
		if err != nil {
			return err
		}
		ck := &checkpoint.Checkpoint{}
		if gguf.IsFileName(path) {
			// The tokenizer files derived from its metadata.
			ck, err = ggufmodel.OpenModel(path)
		} else {
			ck.Dir, err = checkpoint.Resolve(path)
		}
		if err != nil {
			return err
		}
		*tokPath = ck.TokenizerPath()
	}
	tok, err := tokenizer.Load(*tokPath)
	if err != nil {
		return err
	}
	var tmpl chat.TemplateConfig
	if *chatOn {
		if tmpl, err = chat.ConfigBeside(*tokPath); err != nil {
			return err
		}
	}
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	for line := 1; in.Scan(); line++ {
		text, err := parseTextLine(in.Bytes())
		if err != nil {
			return fmt.Errorf("stdin line %d: %v", line, err)
		}
		if *chatOn {
			if text, err = chat.Render(tmpl, tokenizer.Turns(*system, text), true); err != nil {
				return fmt.Errorf("stdin line %d: %v", line, err)
			}
		}
		b, _ := json.Marshal(struct {
			IDs []int `json:"ids"`
		}{nonNil(tok.Encode(text))})
		out.Write(append(b, '\n'))
	}
	return in.Err()
}

func parseTextLine(b []byte) (string, error) {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &obj); err != nil || obj.Text == nil {
		return "", fmt.Errorf(`want a JSON string or {"text": ...}, got %.40q`, b)
	}
	return *obj.Text, nil
}

func nonNil(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}
