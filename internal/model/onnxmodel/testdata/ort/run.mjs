// node run.mjs MODEL.onnx IDS OUT: runs MODEL.onnx (input_ids -> logits)
// on onnxruntime-web's wasm CPU provider, single-threaded, over the
// comma-separated token ids IDS, and writes every position's logit row to
// OUT as little-endian float32, row after row.
import { writeFileSync } from 'node:fs';
import * as ort from 'onnxruntime-web';

const [model, ids, out] = process.argv.slice(2);
ort.env.wasm.numThreads = 1;
const session = await ort.InferenceSession.create(model, { executionProviders: ['wasm'] });
const tokens = ids.split(',').map(BigInt);
const res = await session.run({ input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens), [1, tokens.length]) });
const logits = res.logits;
if (logits.dims.length !== 3 || logits.dims[1] !== tokens.length) throw new Error(`logits have shape ${logits.dims}, want (1, ${tokens.length}, vocab)`);
writeFileSync(out, Buffer.from(logits.data.buffer, logits.data.byteOffset, logits.data.byteLength));
