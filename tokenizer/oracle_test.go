package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The oracle is Hugging Face's tokenizers.js with the real Qwen vocabulary,
// pinned in testdata/oracle/package.json. Tests that need it skip when node
// or its node_modules are missing.
const oracleDir = "testdata/oracle"

func needOracle(tb testing.TB) string {
	tb.Helper()
	skip := tb.Skip
	if os.Getenv("CI") != "" {
		skip = tb.Fatal // CI installs the oracle: a skip there would hide a broken install
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node not found; install Node.js and run `make deps` (npm ci --prefix tokenizer/testdata/oracle)")
	}
	if _, err := os.Stat(filepath.Join(oracleDir, "node_modules")); err != nil {
		skip("oracle not installed; run `make deps` (npm ci --prefix tokenizer/testdata/oracle)")
	}
	return node
}

var qwen struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

// qwenTokenizer loads the real Qwen tokenizer.json, written by the oracle,
// once per test binary.
func qwenTokenizer(tb testing.TB) *Tokenizer {
	tb.Helper()
	node := needOracle(tb)
	qwen.once.Do(func() {
		dir, err := os.MkdirTemp("", "tokenizer-oracle")
		if err != nil {
			qwen.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "tokenizer.json")
		cmd := exec.Command(node, "oracle.mjs", "write-tokenizer", path)
		cmd.Dir = oracleDir
		if out, err := cmd.CombinedOutput(); err != nil {
			qwen.err = fmt.Errorf("oracle write-tokenizer: %v: %s", err, bytes.TrimSpace(out))
			return
		}
		qwen.tok, qwen.err = Load(path)
	})
	if qwen.err != nil {
		tb.Fatalf("loading the oracle's tokenizer.json: %v", qwen.err)
	}
	return qwen.tok
}

// oracleEncode runs `node oracle.mjs encode` on texts.
func oracleEncode(t *testing.T, texts []string) [][]int {
	t.Helper()
	node := needOracle(t)
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, s := range texts {
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, "oracle.mjs", "encode")
	cmd.Dir = oracleDir
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle encode: %v\n%s", err, stderr.Bytes())
	}
	var res [][]int
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct{ IDs []int }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("oracle output line %d: %v", len(res)+1, err)
		}
		res = append(res, line.IDs)
	}
	if len(res) != len(texts) {
		t.Fatalf("oracle returned %d lines for %d strings", len(res), len(texts))
	}
	return res
}

func readConformance(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/conformance.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("conformance.jsonl:%d: %v", i+1, err)
		}
		texts = append(texts, s)
	}
	return texts
}

func TestOracleConformance(t *testing.T) {
	tok := qwenTokenizer(t)
	texts := readConformance(t)
	want := oracleEncode(t, texts)
	bad := 0
	for i, s := range texts {
		got := tok.Encode(s)
		if !equalIDs(got, want[i]) {
			if bad++; bad <= 5 {
				t.Errorf("conformance.jsonl:%d: Encode(%q)\n got %v\nwant %v", i+1, s, got, want[i])
			}
		}
		if utf8.ValidString(s) {
			if d := tok.Decode(got, false); d != norm.NFC.String(s) {
				t.Errorf("conformance.jsonl:%d: Decode(Encode(%q)) = %q, want its NFC %q", i+1, s, d, norm.NFC.String(s))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d strings differ from the oracle", bad, len(texts))
	}
	t.Logf("%d strings match the oracle", len(texts)-bad)
}

func TestOracleChatML(t *testing.T) {
	tok := qwenTokenizer(t)
	prompt := ChatML([]Message{
		{"system", DefaultSystem},
		{"user", "What is 2+2? Answer in one word.\nThen say <|im_end|> literally."},
		{"assistant", "Four."},
		{"user", "日本語で？ 🙂"},
	}, true)
	want := oracleEncode(t, []string{prompt})[0]
	got := tok.Encode(prompt)
	if !equalIDs(got, want) {
		t.Fatalf("Encode(ChatML)\n got %v\nwant %v", got, want)
	}
	start, _ := tok.TokenID("<|im_start|>")
	end, _ := tok.TokenID("<|im_end|>")
	if start != 151644 || end != 151645 {
		t.Fatalf("<|im_start|>, <|im_end|> = %d, %d; want 151644, 151645", start, end)
	}
	if got[0] != start || count(got, start) != 5 || count(got, end) != 5 {
		t.Errorf("want 5 single-id <|im_start|> and 5 <|im_end|> (one inside the text), got %v", got)
	}
	if d := tok.Decode(got, false); d != prompt {
		t.Errorf("Decode = %q, want the prompt %q", d, prompt)
	}
	if d := tok.Decode(got, true); bytes.Contains([]byte(d), []byte("<|im_")) {
		t.Errorf("Decode(skipSpecial) kept special tokens: %q", d)
	}
}

func TestOracleVocab(t *testing.T) {
	tok := qwenTokenizer(t)
	if got := tok.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d, want 151669", got)
	}
	for tokStr, want := range map[string]int{"<|endoftext|>": 151643, "Ġthe": 279, "!": 0, "</think>": 151668} {
		if id, ok := tok.TokenID(tokStr); !ok || id != want {
			t.Errorf("TokenID(%q) = %d, %v; want %d", tokStr, id, ok, want)
		}
	}
	if !tok.IsSpecial(151643) || tok.IsSpecial(151667) || tok.IsSpecial(279) {
		t.Error("IsSpecial: <|endoftext|> is special, <think> and Ġthe are not")
	}
}

// BenchmarkEncode measures the real tokenizer on "typical" text (the
// conformance strings under 300 bytes, joined into one document) with the
// word cache warm, as in a long-running process, and cold, emptied before
// each pass; and on the whole corpus, whose few long single-word strings
// (1000 × "a", 500 spaces) miss the cache and dominate its time.
func BenchmarkEncode(b *testing.B) {
	tok := qwenTokenizer(b)
	data, err := os.ReadFile("testdata/conformance.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var all, short []string
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var s string
		if json.Unmarshal(line, &s) == nil {
			all = append(all, s)
			if len(s) < 300 {
				short = append(short, s)
			}
		}
	}
	typical := []string{strings.Join(short, "\n")}
	run := func(name string, texts []string, cold bool) {
		n := 0
		for _, s := range texts {
			n += len(s)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(n))
			for range b.N {
				if cold {
					tok.model.mu.Lock()
					clear(tok.model.cache)
					tok.model.mu.Unlock()
				}
				for _, s := range texts {
					tok.Encode(s)
				}
			}
		})
	}
	run("typical/warm", typical, false)
	run("typical/cold", typical, true)
	run("corpus/warm", all, false)
}

func equalIDs(a, b []int) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

func count(ids []int, id int) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}
