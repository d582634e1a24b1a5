package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/text/tokenizer"
	"logitscope/internal/text/tokenizer/oracletest"
)

// `logitscope tokenize` gives Hugging Face's ids on the real Qwen
// vocabulary for every conformance string, plain and with --chat.
func TestTokenizeMatchesHuggingFace(t *testing.T) {
	tokPath := filepath.Join(t.TempDir(), "tokenizer.json")
	oracletest.Run(t, nil, "write-tokenizer", tokPath)
	texts, err := os.ReadFile("../../internal/text/tokenizer/testdata/conformance.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(texts), "\n"), "\n")
	if len(lines) < 300 {
		t.Fatalf("only %d conformance strings", len(lines))
	}

	// --chat wraps each text in the template; the oracle gets the
	// templated text itself, special tokens and all.
	var chat bytes.Buffer
	for _, l := range lines {
		var s string
		json.Unmarshal([]byte(l), &s)
		b, _ := json.Marshal(tokenizer.ChatML(tokenizer.Turns("", s), true))
		chat.Write(append(b, '\n'))
	}
	for _, c := range []struct {
		name     string
		args     []string
		in, want []byte
	}{
		{"plain", nil, texts, oracletest.Run(t, texts, "encode")},
		{"chat", []string{"--chat"}, texts, oracletest.Run(t, chat.Bytes(), "encode")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tokenizeFrom(bytes.NewReader(c.in), append([]string{"--tokenizer", tokPath}, c.args...), &out, os.Stderr); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(out.String()), "\n")
			want := strings.Split(strings.TrimSpace(string(c.want)), "\n")
			if len(got) != len(lines) || len(want) != len(lines) {
				t.Fatalf("%d texts, %d results, %d from the oracle", len(lines), len(got), len(want))
			}
			bad := 0
			for i := range lines {
				if got[i] != want[i] {
					if bad++; bad <= 3 {
						t.Errorf("text %s\n got %s\nwant %s", lines[i], got[i], want[i])
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d texts differ from Hugging Face", bad, len(lines))
			}
			t.Logf("%d texts: ids equal to Hugging Face's", len(lines))
		})
	}
}

func TestTokenizeInput(t *testing.T) {
	dir := tiny(t)
	in := "\"Hello\"\n{\"text\": \"Hello\"}\n\"\"\n"
	var out bytes.Buffer
	if err := tokenizeFrom(strings.NewReader(in), []string{"--model", dir}, &out, os.Stderr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != lines[1] || lines[2] != `{"ids":[]}` || !strings.HasPrefix(lines[0], `{"ids":[`) {
		t.Fatalf("got %q", lines)
	}
	err := tokenizeFrom(strings.NewReader("\"ok\"\nnot json\n"), []string{"--model", dir}, &out, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "stdin line 2") {
		t.Fatalf("err = %v", err)
	}
	err = tokenizeFrom(strings.NewReader(""), []string{"--tokenizer", filepath.Join(dir, "nope.json")}, &out, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Fatalf("err = %v", err)
	}
}

// mkmodel --tokenizer ships Qwen's real tokenizer; capture then templates
// and encodes prompts exactly as Hugging Face does.
func TestMkmodelWithQwenTokenizer(t *testing.T) {
	tokPath := filepath.Join(t.TempDir(), "tokenizer.json")
	oracletest.Run(t, nil, "write-tokenizer", tokPath)
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := run(t, mkmodelCmd, "--preset", "tiny", "--tokenizer", tokPath, "--out", dir); err != nil {
		t.Fatal(err)
	}
	var idsOut bytes.Buffer
	out, err := run(t, captureCmd, "--model", dir, "--max-new", "2", "--prompt-ids", "-",
		"--dump-logits", filepath.Join(t.TempDir(), "q.dump"), "Give me a short introduction to large language models.")
	if err != nil {
		t.Fatal(err)
	}
	idsOut.WriteString(strings.SplitN(out, "\n", 2)[0])
	b, _ := json.Marshal(tokenizer.ChatML(tokenizer.Turns("", "Give me a short introduction to large language models."), true))
	want := strings.TrimSpace(string(oracletest.Run(t, append(b, '\n'), "encode")))
	if idsOut.String() != want {
		t.Fatalf("prompt ids\n got %s\nwant %s", idsOut.String(), want)
	}
	if !strings.Contains(out, "rows x 151680 vocab") {
		t.Fatalf("vocabulary not sized to the tokenizer:\n%s", out)
	}
}
