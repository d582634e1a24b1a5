// Command genconformance writes the oracle conformance strings, one JSON
// string per line:
//
//	go run ./internal/text/tokenizer/testdata/genconformance > internal/text/tokenizer/testdata/conformance.jsonl
//
// The output is committed so the test does not depend on this program. It
// keeps to characters of Unicode 15.0, the version of Go's tables, since the
// oracle's newer tables would classify later characters differently. The
// first 420 strings are the Qwen-only corpus as it was; the rest bring in the
// added tokens and habits of the other real tokenizers (Llama 2 and 3,
// Gemma 3, DeepSeek-V3).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

var hand = []string{
	"",
	" ",
	"Hello world",
	"Hello, world! How are you doing today?",
	"The quick brown fox jumps over the lazy dog.",
	"It's a dog's life, isn't it? We'll see; they've gone, I'm here, you'd know, we're done.",
	"IT'S A DOG'S LIFE, ISN'T IT? WE'LL SEE; THEY'VE GONE, I'M HERE, YOU'D KNOW, WE'RE DONE.",
	"'S 'T 'RE 'VE 'M 'LL 'D 's 't 're 've 'm 'll 'd 'Re 'rE 'Ll 'lL 'Ve",
	"'sre 'tall 'redo 'verb 'man 'llama 'dog",
	"don't can't won't shan't y'all o'clock rock'n'roll",
	"'' ''' 'x' \"quoted\" ‘curly’ “double” 's",
	"'ſ 'ſt ſtraße",
	"  leading spaces",
	"trailing spaces   ",
	"trailing tab\t",
	"a  b   c    d     e",
	"\t\tindented\twith\ttabs",
	"line one\nline two\nline three",
	"windows\r\nline\r\nendings\r\n",
	"\r\n\r\n\r\n",
	"\n\n\n\n\n\n\n\n\n\n",
	"para one.\n\n\npara two.\n\n\n\n",
	"  \n  \n  ",
	" \t \n \t x",
	"end with newline\n",
	"   ",
	"\t",
	"\n",
	"\r",
	"\r\r\n\n\r",
	"a\u00a0b\u2003c\u3000d\u2028e\u2029f\u0085g",
	"\u00a0\u00a0word",
	"\v\fvertical tab and form feed",
	"\u200b\u200c\u200d zero widths \ufeffbom",
	"0",
	"1234567890",
	"3.14159265358979323846264338327950288419716939937510",
	"12,345,678.90 and 1e-10 and -42 and +7 and 0x1F and 0b1010",
	"Call 555-0123 or +1 (800) 555-0199 before 2024-12-31T23:59:59Z.",
	"١٢٣٤٥ ۱۲۳ ०१२३ ๑๒๓ ①②③ Ⅻ ½ ¾ ²³",
	"99999999999999999999999999999999999999999999999999999999999999999999",
	"你好，世界！今天天气很好。",
	"我爱自然语言处理和机器学习。中文分词是一个难题。",
	"日本語のテキストです。ひらがなとカタカナと漢字。",
	"東京スカイツリーは634メートルです。",
	"ｶﾀｶﾅ 半角カナ ＡＢＣ 全角",
	"한국어 텍스트입니다. 안녕하세요!",
	"다람쥐 헌 쳇바퀴에 타고파",
	"مرحبا بالعالم! هذا نص عربي.",
	"العربية: ١٢٣ والأرقام 123",
	"שלום עולם",
	"नमस्ते दुनिया! यह हिंदी पाठ है।",
	"क्षत्रिय ज्ञान श्री",
	"สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
	"Привет, мир! Съешь же ещё этих мягких французских булок.",
	"Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
	"Tiếng Việt có dấu: Đây là một câu.",
	"Türkçe: İstanbul'da ılık bir gün.",
	"Zürich, Größe, Straße, naïve café résumé",
	"ქართული ენა",
	"Հայերեն",
	"አማርኛ",
	"ᚠᛇᚻ᛫ᛒᛦᚦ",
	"😀",
	"😀😃😄😁😆😅😂🤣",
	"👍🏻👍🏼👍🏽👍🏾👍🏿",
	"👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, 🧑🏿‍🤝‍🧑🏻",
	"🇺🇸🇯🇵🇨🇳🇩🇪🇫🇷🇬🇧",
	"I ❤️ tokenizers ✨🎉",
	"#️⃣ 1️⃣ ©️ ®️ ™️",
	"mixed English中文日本語한국어العربيةहिन्दी",
	"Go语言很好用，Rust也不错。",
	"<|im_start|>",
	"<|im_end|>",
	"<|endoftext|>",
	"<|im_start|>user\nHello<|im_end|>\n",
	"text<|endoftext|>more text",
	"<|im_start|><|im_end|><|endoftext|>",
	"<|im_start",
	"<|im_start|",
	"<|im_end",
	"|im_start|>",
	"<<|im_start|>>",
	"<|<|im_start|>|>",
	"<|im_start|>system\n<|im_start|>",
	" <|im_start|> spaced <|im_end|> ",
	"<|endoftext|><|endoftext|><|endoftext|>",
	"<think>\nreasoning here\n</think>\n\nanswer",
	"<tool_call>{\"name\": \"f\"}</tool_call>",
	"<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
	"<|vision_start|><|image_pad|><|vision_end|>",
	"<|unknown_token|> <|im_startx|> <|IM_START|>",
	"e<|endoftext|>\u0301",
	"<thinking> not a token </thinking>",
	"Supercalifragilisticexpialidocious",
	"pneumonoultramicroscopicsilicovolcanoconiosis",
	"Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
	"antidisestablishmentarianism floccinaucinihilipilification",
	"cafe\u0301 re\u0301sume\u0301 nai\u0308ve",
	"e\u0301\u0301\u0301 a\u0308\u0304 o\u0323\u0302",
	"\u1100\u1161\u11a8 hangul jamo",
	"A\u030a Å Å",
	"ﬁ ﬂ ﬀ ligatures",
	"x\u0301y z\u20d7",
	"\x00",
	"\x00\x01\x02\x03\x04\x05\x06\x07\x08",
	"\x1b[31mred\x1b[0m",
	"bell\x07 backspace\x08 delete\x7f",
	"\x1c\x1d\x1e\x1f separators",
	"\u0080\u0081\u009f C1 controls",
	"\ufffd replacement \ufffd\ufffd",
	"\ue000\uf8ff private use",
	"\U0001d400\U0001d401 math bold",
	"\U00010000 \U0010ffff \U000e0001",
	"https://example.com/path/to/page?query=value&other=123#fragment",
	"Visit http://www.example.org or ftp://files.example.net/pub/file.tar.gz",
	"email: someone@example.com, mailto:a.b+c@d.co.uk",
	"{\"key\": \"value\", \"number\": 42, \"array\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
	"[{\"id\":1,\"name\":\"Alice\"},{\"id\":2,\"name\":\"Bob\"}]",
	"# Heading\n\n## Subheading\n\n- item one\n- item two\n\n1. first\n2. second\n\n**bold** _italic_ `code`\n",
	"| a | b |\n|---|---|\n| 1 | 2 |\n",
	"> quote\n>> nested quote\n\n---\n\n[link](https://x.y) ![img](a.png)",
	"```python\nprint('hi')\n```",
	"E = mc^2, a^2 + b^2 = c^2, ∫₀^∞ e^{-x²} dx = √π/2",
	"∀x ∈ ℝ, ∃y: x ≤ y ∧ y ≠ x ⇒ x < y",
	"$$\\frac{1}{2} \\sum_{i=1}^{n} x_i^2$$",
	"∑∏∫∂∇√∞≈≠≡≤≥⊂⊃∪∩∧∨¬⊕⊗",
	"α β γ δ ε ζ η θ λ μ π σ φ ψ ω",
	"2+2=4; 10/3≈3.333; 5!=120; 2**10=1024",
	"$100 €50 £30 ¥1000 ₹500 ₿0.001",
	"50% off!!! Buy now??? ...really... --- ___ *** ~~~",
	"!@#$%^&*()_+-=[]{}|;':\",./<>?`~",
	"...",
	"?!",
	"-----",
	"=====\n=====",
	"a.b.c.d.e",
	"snake_case_name camelCaseName PascalCaseName kebab-case-name SCREAMING_CASE",
	"file.txt /usr/local/bin C:\\Windows\\System32 ~/dotfiles/.bashrc",
	"@user #hashtag $VAR %PATH% &amp; &lt;tag&gt;",
	"<html><body><p class=\"x\">Hello</p></body></html>",
	"<!-- comment --> <script>alert('x');</script>",
	"SELECT id, name FROM users WHERE age > 21 ORDER BY name;",
	"abc\u00e9\u00e8\u00ea\u00ebdef",
	"ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝÞß",
	"àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿ",
	"ĀāĂăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚěĜĝĞğ",
	"Ǆǅǆ ǈ ǋ ǲ",
	"ʰʲʷ ˈˌ ᵃᵇᶜ",
	"x'y z'S ('s) -'t",
	" 's",
	"'s",
	"''s",
	"\n's",
	"a's b't c're d've e'm f'll g'd",
	"1's 2't 3'RE",
	"the 1990's and 80's",
	"  !!\n\n  ??\r\n",
	" !x",
	" .\n\n.",
	"a\n\n b",
	"x \n y",
	"\t\n\tx",
	"   \t   hello",
	"word\u00a0\u00a0\u00a0next",
	"  \u3000  全角スペース",
	"12abc34def",
	"abc123def456",
	"v1.2.3-beta+build.5",
	"0.1+0.2=0.30000000000000004",
	"1,000,000,000,000",
	"(1)(2)[3]{4}<5>",
}

var code = []string{
	"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"Hello, 世界\")\n}\n",
	"func (t *Tokenizer) Encode(text string) []int {\n\tids := make([]int, 0, len(text)/3)\n\treturn ids\n}",
	"def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])\n",
	"class Foo(Base):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, x: int = 0) -> None:\n        self._x = x  # comment\n",
	"import numpy as np\narr = np.zeros((3, 4), dtype=np.float32)\narr[1:, ::2] += 1.5\n",
	"function add(a, b) {\n  return a + b;\n}\nconst f = (x) => x ** 2;\nconsole.log(`${add(1, 2)} ${f(3)}`);\n",
	"const obj = { a: 1, b: [2, 3], c: { d: 'e' } };\nexport default obj;\n",
	"#include <stdio.h>\n\nint main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
	"template <typename T>\nstd::vector<T> f(const std::vector<T>& v) { return {v.rbegin(), v.rend()}; }\n",
	"fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
	"impl<'a> Iterator for Iter<'a> {\n    type Item = &'a str;\n}\n",
	"public class Main {\n    public static void main(String[] args) {\n        System.out.println(\"hi\");\n    }\n}\n",
	"#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  echo \"$f\" | tr 'a-z' 'A-Z'\ndone\n",
	"SELECT u.id, COUNT(*) AS n\nFROM users u\nJOIN orders o ON o.user_id = u.id\nGROUP BY u.id\nHAVING n > 5;\n",
	"<div class=\"container\">\n  <span id='x'>Text &amp; more</span>\n</div>\n",
	"body { margin: 0; padding: 0 1em; }\n.a > .b:hover { color: #ff0000; }\n",
	"key: value\nlist:\n  - a\n  - b\nnested:\n  inner: 1\n",
	"[section]\nname = \"value\"\nnumber = 42\n",
	"(defun square (x) (* x x))\n(mapcar #'square '(1 2 3))\n",
	"main :: IO ()\nmain = mapM_ print [x * 2 | x <- [1..10], odd x]\n",
	"SELECT * FROM t WHERE name LIKE '%o''brien%';",
	"x = [1,2,3]\r\ny = {'a':1}\r\n\r\nprint(x,y)\r\n",
	"\tif (x) {\n\t\treturn;\n\t}\n\n\n\n\t// trailing whitespace   \n",
	"            deeply.indented(code);\n                more();\n",
	"var x=1;var y=2;var z=x+y;if(z>2){z--;}else{z++;}",
	"diff --git a/f.go b/f.go\n@@ -1,3 +1,4 @@\n-old line\n+new line\n context\n",
	"2024-01-15 12:34:56.789 ERROR [main] com.example.App - Connection refused: localhost:8080\n",
	"$ go test ./...\nok  \tlogitscope/tokenizer\t0.123s\n",
	"regex: ^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
	"\\documentclass{article}\n\\begin{document}\n$\\alpha + \\beta$\n\\end{document}\n",
}

// fragments are mixed at random into longer strings.
var fragments = []string{
	"the", " the", "The", " THE", "tokenizer", " token", "izer", "'s", "'ll", "'RE", "'Ve",
	" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u00a0", "\u3000",
	"0", "7", "42", "2024", "3.14", "1e9", "١٢", "½",
	"中文", "日本", "語", "한국", "عربي", "हिन्दी", "ไทย", "Ελληνικά", "русский",
	"😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️",
	"e\u0301", "\u0301", "A\u030a", "ﬁ",
	"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_", "|>", "<", ">", "<think>",
	"!", "?", ".", ",", ";", ":", "...", "--", "()", "[]", "{}", "\"", "'", "`", "#", "@", "$", "%", "&", "*",
	"\x00", "\x1b", "\x7f", "\u200d", "\ufeff", "\u2028",
	"http://x.io/a?b=c", "{\"k\":1}", "a_b", "fooBar", "x+y=z",
	"über", "naïve", "ſ",
}

// others are the special and added tokens of the other real tokenizers,
// inside text, at its edges, cut short and next to each other.
var others = []string{
	"<|begin_of_text|>Hello<|eot_id|>",
	"<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"<|reserved_special_token_5|> and <|reserved_special_token_250|>",
	"<|begin_of_text|><|begin_of_text|>",
	"text<|end_of_text|>",
	"<|eot_id",
	"<|python_tag|>print(1)<|eom_id|>",
	"<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
	"<start_of_image> <image_soft_token> <end_of_image>",
	"<unused0><unused99> <unused",
	"<mask> is <mask>",
	"<table><tr><td>x</td></tr></table>",
	"<h1>Title</h1>\n\n\n<p>para</p>",
	"<strong>bold</strong> <em>it</em> <code>x</code>",
	"[multimodal]",
	"<s>[INST] Hi [/INST] Hello</s>",
	"<s> <s><s>x</s>",
	"<unk> <pad> <eos>",
	"<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>",
	"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
	"<｜fim▁begin｜>def f():<｜fim▁hole｜>\n<｜fim▁end｜>",
	"<|EOT|> after",
	"<｜place▁holder▁no▁42｜>",
	"<｜begin▁of▁sentence",
	"▁ ▁▁ x▁y ▁▁▁",
	"▁Hello▁world",
	"▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁",
	"\t\t\tindented\n\t\t\t\tmore",
	"a\n\nb\n\n\nc\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nd",
	"<0x41><0xE5><0x8F><0xAB> are byte tokens written out",
	"<0x0A>",
}

// numbers are digit runs of every length (Llama 3 and DeepSeek take
// \p{N}{1,3}, Qwen one digit, SentencePiece splits them by merges).
var numbers = []string{
	"1 12 123 1234 12345 123456 1234567 12345678",
	"12345678901234567890123456789",
	"3.14159 0.000001 -273.15 6.022e23 1/3",
	"1,234,567 and 1.234.567,89 and 1 234 567",
	"$1234.56 €99,99 ¥100000",
	"２０２４年１２月 ２５日",
	"१२३४५ ١٢٣٤٥٦ ๑๒๓๔",
	"1st 2nd 3rd 4th 21st 100th",
	"v10.0.19045 build 2024.11.30",
	"0x7FFFFFFF 0b1111 0o777",
	"½¼¾ ⅓ ⅔ ²³¹ ①②③④⑤⑥",
	"Ⅰ Ⅱ Ⅲ Ⅳ Ⅻ ↉",
	"+1-555-0100 (555) 555-0199",
	"IPv4 192.168.0.1 IPv6 fe80::1",
}

// scripts adds what the first list lacks: mixed Han and kana (DeepSeek-V3
// splits them out), characters that only byte fallback spells in Llama 2,
// and text next to U+FFFD or made of byte-level characters (mojibake).
var scripts = []string{
	"ひらがなカタカナ漢字mixed日本語English",
	"中文English混合123数字",
	"東京タワー、スカイツリー。",
	"𠀀𠀁𪚥 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
	"🫠🫨🪿 🧑‍🧑‍🧒",
	"ꦗꦮ ᠮᠣᠩᠭᠣᠯ ᏣᎳᎩ ⴰⵣⵓⵍ",
	"\ufffd\ufffdabc caf\ufffd \ufffd",
	"Ã©tÃ© â€œquotedâ€\u009d Ä  Ċ Ġ",
	"ĠĠĠ ĊĊ Ġhello Ċworld",
	"\u0100\u0101\u0120\u0121\u0143",
	"e\u0301\u0302\u0303\u0304\u0305",
	"zero\u200bwidth\u200cjoin\u200dx",
	"\u202eright to left\u202c and \u2066isolate\u2069",
	"tab\tvtab\vff\fnel\u0085ls\u2028ps\u2029",
	"   \t\t  \n\n  \u00a0\u00a0  \u3000 end",
	"word\n \n \n word",
	"İstanbul ΣΊΣΥΦΟΣ ǅ",
}

// moreFragments are mixed, with fragments, into the last random strings.
var moreFragments = []string{
	"<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<bos>", "<start_of_turn>", "<end_of_turn>",
	"<s>", "</s>", "<unk>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<|EOT|>", "<mask>", "<td>",
	"▁", "▁▁", " ▁", "\n\n", "\n\n\n", "\t\t", "    ",
	"123", "4567", "89012", "٣٤", "２３",
	"漢字", "かな", "カナ", "한", "🫠", "𪚥",
	"\ufffd", "Ã", "Ġ", "Ċ", "<0x41>",
	"the", " quick", "BROWN", "'s", "'LL", "don't",
	"(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "\"", "'", "`", "$", "#", "!", "?", ".", ",", ":", ";", "-", "_", "=",
}

func main() {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	seen := map[string]bool{}
	put := func(s string) {
		if seen[s] {
			return
		}
		seen[s] = true
		if err := enc.Encode(s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	for _, s := range hand {
		put(s)
	}
	for _, s := range code {
		put(s)
	}

	// Whitespace runs of every kind before, between and after words.
	spaces := []string{" ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "  \n\n  ", "\t \t", "\u00a0", " \u00a0 ", "\r", "\n\r"}
	for _, sp := range spaces {
		put("word" + sp + "word")
		put(sp + "word")
		put("word" + sp)
		put("!" + sp + "?")
		put("1" + sp + "2")
	}

	// Long inputs: words, numbers and runs far beyond the BPE cache limit.
	put(strings.Repeat("a", 1000))
	put(strings.Repeat("ab", 300))
	put(strings.Repeat(" ", 500))
	put(strings.Repeat("\n", 200))
	put(strings.Repeat("!", 300))
	put(strings.Repeat("9", 500))
	put(strings.Repeat("中", 300))
	put(strings.Repeat("😀", 100))
	put(strings.Repeat("hello world ", 100))
	put(strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 20))

	// Random mixtures of fragments, deterministic across runs.
	rng := rand.New(rand.NewPCG(1, 2))
	mix := func(frags []string, until int) {
		for len(seen) < until {
			n := 1 + rng.IntN(12)
			var b strings.Builder
			for range n {
				b.WriteString(frags[rng.IntN(len(frags))])
			}
			put(b.String())
		}
	}
	mix(fragments, 420)

	for _, list := range [][]string{others, numbers, scripts} {
		for _, s := range list {
			put(s)
		}
	}
	put(strings.Repeat("<start_of_turn>", 50))
	put(strings.Repeat("1234567890", 60))
	put(strings.Repeat("\t", 100))
	put(strings.Repeat("▁", 300))
	put(strings.Repeat("漢字かな", 80))
	mix(append(append([]string{}, fragments...), moreFragments...), 700)
}
