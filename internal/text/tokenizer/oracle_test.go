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

	"logitscope/internal/text/tokenizer/oracletest"
)

// The oracle (package oracletest) is Hugging Face's tokenizers.js with
// real vocabularies.

// realNames are the tokenizers the oracle ships (oracle.mjs).
var realNames = []string{"qwen3", "llama3_1", "gemma3", "llama2", "deepseek_v3"}

type loaded struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

var real sync.Map // name → *loaded

// realTokenizer loads a real tokenizer.json, written by the oracle, once
// per test binary.
func realTokenizer(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	node := oracletest.Node(tb)
	v, _ := real.LoadOrStore(name, &loaded{})
	l := v.(*loaded)
	l.once.Do(func() {
		dir, err := os.MkdirTemp("", "tokenizer-oracle")
		if err != nil {
			l.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, name+".json")
		cmd := exec.Command(node, "oracle.mjs", "write-tokenizer", path, name)
		cmd.Dir = oracletest.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			l.err = fmt.Errorf("oracle write-tokenizer %s: %v: %s", name, err, bytes.TrimSpace(out))
			return
		}
		l.tok, l.err = Load(path)
	})
	if l.err != nil {
		tb.Fatalf("loading the oracle's %s tokenizer.json: %v", name, l.err)
	}
	return l.tok
}

func qwenTokenizer(tb testing.TB) *Tokenizer { return realTokenizer(tb, "qwen3") }

// runOracle runs `node oracle.mjs args...` with texts as JSON lines on
// stdin and decodes one JSON line of output per text into T.
func runOracle[T any](t *testing.T, texts []string, args ...string) []T {
	t.Helper()
	lines := make([]string, len(texts))
	for i, s := range texts {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		lines[i] = string(b)
	}
	return runOracleLines[T](t, lines, args...)
}

// runOracleLines is runOracle with the input lines already JSON.
func runOracleLines[T any](t *testing.T, lines []string, args ...string) []T {
	t.Helper()
	var in bytes.Buffer
	for _, l := range lines {
		in.WriteString(l + "\n")
	}
	out := oracletest.Run(t, in.Bytes(), args...)
	var res []T
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line T
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("oracle output line %d: %v", len(res)+1, err)
		}
		res = append(res, line)
	}
	if len(res) != len(lines) {
		t.Fatalf("oracle returned %d lines for %d inputs", len(res), len(lines))
	}
	return res
}

// oracleEncode returns the oracle's Qwen ids of texts, no special tokens.
func oracleEncode(t *testing.T, texts []string) [][]int {
	t.Helper()
	var ids [][]int
	for _, r := range runOracle[struct{ IDs []int }](t, texts, "encode") {
		ids = append(ids, r.IDs)
	}
	return ids
}

// conformLine is one line of `oracle.mjs conform`.
type conformLine struct {
	IDs      []int  `json:"ids"`
	Special  []int  `json:"special"`
	Text     string `json:"text"`
	TextSkip string `json:"text_skip"`
	Pair     []int  `json:"pair"` // with conformPair, special tokens added
}

// conformPair is the second text of the oracle's pairs (oracle.mjs PAIR).
const conformPair = "And a second text, 2 of 2."

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

// TestOracleConformance checks every conformance string on every real
// tokenizer: ids without and with special tokens, decoding both (the
// second skipping special tokens), and the ids of the string paired with
// another, against Hugging Face. tokenizers.js loses the second text of a
// pair under a ByteLevel post-processor (Qwen, DeepSeek-V3), where the Rust
// crate concatenates the two: there the pair is checked to be that.
func TestOracleConformance(t *testing.T) {
	texts := readConformance(t)
	for _, name := range realNames {
		t.Run(name, func(t *testing.T) {
			tok := realTokenizer(t, name)
			want := runOracle[conformLine](t, texts, "conform", name)
			var bad [5]int // ids, special ids, text, text skipping special tokens, pair
			template := tok.post != nil
			pairTail := tok.Encode(conformPair)
			report := func(kind, i int, format string, args ...any) {
				if bad[kind]++; bad[kind] <= 3 {
					t.Errorf("conformance.jsonl:%d: "+format, append([]any{i + 1}, args...)...)
				}
			}
			for i, s := range texts {
				w := want[i]
				ids := tok.Encode(s)
				if !equalIDs(ids, w.IDs) {
					report(0, i, "Encode(%q)\n got %v\nwant %v", s, ids, w.IDs)
				}
				special := tok.EncodeWith(s, EncodeOptions{AddSpecialTokens: true})
				if !equalIDs(special, w.Special) {
					report(1, i, "EncodeWith(%q, AddSpecialTokens)\n got %v\nwant %v", s, special, w.Special)
				}
				if d := tok.Decode(w.IDs, false); d != w.Text {
					report(2, i, "Decode(%v) = %q, want %q", w.IDs, d, w.Text)
				}
				if d := tok.Decode(w.Special, true); d != w.TextSkip {
					report(3, i, "Decode(%v, skipSpecial) = %q, want %q", w.Special, d, w.TextSkip)
				}
				wantPair := w.Pair
				if !template {
					wantPair = append(append([]int{}, w.IDs...), pairTail...)
				}
				if pair := tok.EncodePair(s, conformPair, EncodeOptions{AddSpecialTokens: true}); !equalIDs(pair, wantPair) {
					report(4, i, "EncodePair(%q, %q)\n got %v\nwant %v", s, conformPair, pair, wantPair)
				}
			}
			n := len(texts)
			t.Logf("%s: of %d strings, ids match on %d, with special tokens on %d, decode on %d, decode skipping special tokens on %d, pairs on %d",
				name, n, n-bad[0], n-bad[1], n-bad[2], n-bad[3], n-bad[4])
		})
	}
}

// TestOracleTokenTexts decodes single tokens, as the page does to show each
// token: the first and last 300 ids and every 61st in between, which takes
// in byte tokens, added tokens and unused ones.
func TestOracleTokenTexts(t *testing.T) {
	for _, name := range realNames {
		t.Run(name, func(t *testing.T) {
			tok := realTokenizer(t, name)
			n := tok.VocabSize()
			var ids []int
			for id := 0; id < n; id++ {
				if _, ok := tok.Token(id); ok && (id < 300 || id >= n-300 || id%61 == 0) {
					ids = append(ids, id)
				}
			}
			lines := make([]string, len(ids))
			for i, id := range ids {
				lines[i] = fmt.Sprintf("[%d]", id)
			}
			want := runOracleLines[struct{ Text string }](t, lines, "decode", name)
			bad := 0
			for i, id := range ids {
				if got := tok.Decode([]int{id}, false); got != want[i].Text {
					if bad++; bad <= 5 {
						t.Errorf("Decode([%d]) = %q, want %q", id, got, want[i].Text)
					}
				}
			}
			t.Logf("%s: %d of %d single tokens decode as in Hugging Face", name, len(ids)-bad, len(ids))
		})
	}
}

func TestOracleChatML(t *testing.T) {
	tok := qwenTokenizer(t)
	prompt := ChatML([]Message{
		{"system", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
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

// BenchmarkEncodeTokenizers measures each real tokenizer on the typical
// text of BenchmarkEncode, word cache warm. Gemma 3 and Llama 2 have no
// pre-tokenizer splitting words, so a whole line is one BPE word, and
// DeepSeek-V3 splits with three translated regexes.
func BenchmarkEncodeTokenizers(b *testing.B) {
	data, err := os.ReadFile("testdata/conformance.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var short []string
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var s string
		if json.Unmarshal(line, &s) == nil && len(s) < 300 {
			short = append(short, s)
		}
	}
	text := strings.Join(short, "\n")
	for _, name := range realNames {
		tok := realTokenizer(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for range b.N {
				tok.Encode(text)
			}
		})
	}
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
