// ortside.js: a side that runs an ONNX export of the model (logitscope
// export --onnx, served as MODEL/onnx/NAME.onnx and named "onnx/NAME.onnx")
// through onnxruntime-web, which the server serves under /ort/ (serve -ort
// DIR). Loaded by worker.js beside engine.wasm's host: its open and run
// take what engine.wasm's take and give what they give (web/BRIDGE.md),
// so the page's analysis, snapshot and share treat an onnx side as any
// other. The export maps input_ids (int64, (1, S)) to every position's
// logits (float32, (1, S, vocab)), so an onnx side is teacher-forced only:
// a forced request (the reference's prompt and output) or a panel, never
// a greedy decode.
"use strict";

(function (global) {
  const ONNX = "onnx/";
  const ORT_DIR = "/ort/";
  // The WebGPU build: it carries the wasm provider too.
  const ORT_SCRIPT = ORT_DIR + "ort.webgpu.min.js";

  const isONNX = (v) => typeof v === "string" && v.startsWith(ONNX);

  // loadORT loads onnxruntime-web once per worker, single-threaded: a
  // threaded build needs cross-origin isolation, which the page does not
  // ask for, and one thread is what engine.wasm's CPU path uses too.
  let ort = null;
  function loadORT() {
    if (ort) return ort;
    try {
      importScripts(ORT_SCRIPT);
    } catch (e) {
      throw new Error(`open: an onnx side runs through onnxruntime-web, and this server does not serve it (${ORT_SCRIPT}: ${e.message}): start serve with -ort DIR (onnxruntime-web's dist directory), or make deps then make run`);
    }
    ort = global.ort;
    ort.env.wasm.wasmPaths = ORT_DIR;
    ort.env.wasm.numThreads = 1;
    ort.env.wasm.proxy = false;
    return ort;
  }

  // ORTSide is one open export.
  class ORTSide {
    // open fetches model name's export variant (through fetchFiles' Cache
    // Storage, checked against its sha256) and creates the session on
    // onnxruntime-web's WebGPU provider when want is "gpu" (or "auto" and
    // the worker has WebGPU), else its wasm provider. host: worker.js's
    // findModel, fetchFiles, fmtBytes.
    static async open({ name, variant, want, budget, host, progress }) {
      const t0 = performance.now();
      if (name.startsWith(host.LOCAL)) throw new Error(`open: ${variant}: an onnx side runs a served model's ONNX export; a folder from this computer has none`);
      const model = await host.findModel(name);
      const info = (model.variants || []).find((v) => v.kind === "onnx" && v.name === variant);
      const file = model.files.find((f) => f.path === variant);
      if (!info || !file) {
        const have = (model.variants || []).filter((v) => v.kind === "onnx").map((v) => v.name);
        throw new Error(`open: model ${name} has no ONNX export ${variant} (it has ${have.join(", ") || "none"})`);
      }
      if (file.size > budget) throw new Error(`model ${name} (${variant}): its files take ${host.fmtBytes(file.size)}, more than this page's memory budget of ${host.fmtBytes(budget)}`);
      const gpu = want === "gpu" || (want === "auto" && typeof navigator !== "undefined" && !!navigator.gpu);
      if (gpu && !(typeof navigator !== "undefined" && navigator.gpu)) throw new Error("open: device gpu: this browser has no WebGPU (navigator.gpu)");
      const rt = loadORT();
      progress({ phase: "fetch", message: "1 file", loaded: 0, total: file.size });
      const fetched = await host.fetchFiles(name, [file], { onProgress: progress });
      const data = fetched.files.get(file.path);
      const bytes = data instanceof Uint8Array ? data : new Uint8Array(await data.blob.arrayBuffer());
      const ep = gpu ? "webgpu" : "wasm";
      progress({ phase: "open", message: `${name} ${variant} on onnxruntime-web's ${ep} provider`, loaded: 0, total: 0 });
      let session;
      try {
        session = await rt.InferenceSession.create(bytes, { executionProviders: [ep], graphOptimizationLevel: "all" });
      } catch (e) {
        throw new Error(`open: ${name}/${variant}: onnxruntime-web (${ep}): ${e && e.message || e}`);
      }
      const side = new ORTSide(session, rt, variant, info.max_len || 0, model.vocab || 0);
      const version = rt.env.versions && rt.env.versions.web ? ` ${rt.env.versions.web}` : "";
      return {
        side,
        value: {
          device: gpu ? "webgpu" : "cpu", adapter: `onnxruntime-web${version} ${ep}`, bytes: file.size,
          cachedBytes: fetched.cachedBytes, vocab: side.vocab, ms: performance.now() - t0,
        },
      };
    }

    constructor(session, rt, variant, maxLen, vocab) {
      this.session = session;
      this.ort = rt;
      this.variant = variant;
      this.maxLen = maxLen;
      this.vocab = vocab;
    }

    close() {
      if (this.session) this.session.release();
      this.session = null;
    }

    // logits runs ids through the export and returns the rows [lo, hi) of
    // its output (positions; row p predicts the token after ids[p]).
    async logits(ids, lo, hi) {
      if (!this.session) throw new Error("run: the onnx session is closed: open the model again");
      if (this.maxLen && ids.length > this.maxLen) {
        throw new Error(`${ids.length} tokens: the export ${this.variant} takes at most ${this.maxLen} (export it again with a larger --onnx-len)`);
      }
      const input = new this.ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]);
      const out = await this.session.run({ input_ids: input });
      const t = out.logits;
      const vocab = t.dims[2];
      if (t.dims[0] !== 1 || t.dims[1] !== ids.length || (this.vocab && vocab !== this.vocab)) {
        throw new Error(`run: the export gave logits of shape [${t.dims.join(", ")}], want [1, ${ids.length}, ${this.vocab || "vocab"}]`);
      }
      this.vocab = vocab;
      const data = await t.getData();
      const rows = data.slice(lo * vocab, hi * vocab); // a copy of its own, transferable
      t.dispose();
      return rows;
    }

    // run takes a wasm/abi Request and returns what Instance.run does: the
    // rows each mode keeps (package session's): forced, the rows from the
    // prompt's last token on (predicting each output); panel, each
    // window's rows but its last (predicting its next tokens).
    async run(request, { onRows } = {}) {
      const t0 = performance.now();
      const mode = request.mode;
      const pieces = [];
      let nrows = 0;
      let firstRowMs = null;
      const keep = (rows) => {
        if (firstRowMs === null) firstRowMs = performance.now() - t0;
        pieces.push(new Uint8Array(rows.buffer));
        nrows += rows.length / this.vocab;
        if (onRows) onRows(nrows);
      };
      const result = { mode, prompt_ids: request.prompt_ids || [], output: [], stopped: false, targets: [], rows: 0, done: true, vocab: 0 };
      if (mode === "forced") {
        const prompt = request.prompt_ids || [];
        const outputs = request.outputs || [];
        if (prompt.length === 0) throw new Error("run: a forced request without prompt ids");
        result.output = outputs;
        result.stopped = outputs.length > 0 && Array.isArray(request.stops) && request.stops.includes(outputs[outputs.length - 1]);
        if (outputs.length > 0) {
          const seq = prompt.concat(outputs.slice(0, -1));
          keep(await this.logits(seq, prompt.length - 1, seq.length));
        }
      } else if (mode === "panel") {
        for (const [i, w] of (request.windows || []).entries()) {
          if (w.length < 2) throw new Error(`run: panel window ${i + 1} has ${w.length} tokens; a window needs at least 2`);
          keep(await this.logits(w, 0, w.length - 1));
          result.targets.push(...w.slice(1));
        }
      } else if (mode === "greedy") {
        throw new Error(`${this.variant} runs through onnxruntime-web, which gives logits for given tokens but does not decode: make it the test side (fed the reference's tokens), or run a panel`);
      } else {
        throw new Error(`run: unknown request mode ${JSON.stringify(mode)} (greedy, forced, panel)`);
      }
      result.rows = nrows;
      result.vocab = this.vocab;
      return { result, vocab: this.vocab, width: this.vocab, pieces, firstRowMs: firstRowMs ?? 0, ms: performance.now() - t0 };
    }
  }

  global.LogitscopeORT = { ONNX, isONNX, ORTSide };
})(self);
