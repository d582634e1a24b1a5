// worker.js: the engine host. In a Worker (started by bridge.js) it answers
// {id, op: "probe"|"open"|"run", args} with {id, ok, value|error} and sends
// {id, progress: {phase, message, loaded, total}} and {log: {level, text}}
// on the way (web/BRIDGE.md). Loaded as a plain script on a page (after
// wasi.js and gpu.js) it only defines self.LogitscopeHost: the Instance class
// and the model fetching, which the ABI test page drives directly.
//
// A classic worker (importScripts) rather than a module worker: the same
// three files then load unchanged as plain <script>s on a test page, with
// no module loader and no bundler, and classic workers run in every browser
// that has WebAssembly (module workers came to Firefox only in 114).
"use strict";

(function (global) {
  const inWorker = typeof WorkerGlobalScope !== "undefined" && global instanceof WorkerGlobalScope;
  if (inWorker) importScripts("wasi.js", "gpu.js", "modelcache.js", "ortside.js");
  const { WASI, MemFS, BlobFile, GuestFile, ProcExit, checkImports } = global.LogitscopeWASI;
  const { GPUHost, requestDevice, probe } = global.LogitscopeGPU;

  const { CACHE_NAME } = global.LogitscopeModelCache;
  const DEFAULT_BUDGET = 1 << 30; // bytes of model files a side may take, fetched or local
  const ENGINE_URL = "/static/engine.wasm";
  const SIMD_URL = "/static/simd.wasm";
  const enc = new TextEncoder();
  const dec = new TextDecoder();

  const fmtBytes = (n) => n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(2)} GiB`
    : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB`
    : n >= 1 << 10 ? `${(n / (1 << 10)).toFixed(1)} KiB` : `${n} bytes`;

  // EngineError is a failed export (status -1): the message is ls_error's.
  // The instance is still usable.
  class EngineError extends Error {}
  // TrapError is an export that trapped: the instance was discarded.
  class TrapError extends Error {}

  const CLOSED = "the engine instance is closed (it trapped or was closed): open the model again";

  // SIMDHost serves engine.wasm's `simd` imports (wasm/ABI.md): the
  // CPU path's kernels in WebAssembly SIMD128, simd.wasm (package
  // wasmsimd), instantiated on the engine instance's memory, which exists
  // only once the instance does: each import forwards to its export,
  // looked up at the call. With no simd.wasm (a browser without SIMD128)
  // available() is 0 and the engine keeps its Go kernels.
  class SIMDHost {
    constructor(module) {
      this.module = module;
      this.x = null;
      this.calls = {}; // kernel -> calls, for tests
    }

    imports(engine) {
      const fns = { available: () => (this.module ? 1 : 0) };
      for (const im of WebAssembly.Module.imports(engine)) {
        if (im.module !== "simd" || im.kind !== "function" || im.name in fns) continue;
        const name = im.name;
        this.calls[name] = 0;
        fns[name] = (...args) => {
          this.calls[name]++;
          return this.x[name](...args);
        };
      }
      return { simd: fns };
    }

    // instantiate makes simd.wasm's instance on memory, checking that it
    // exports every kernel engine imports.
    async instantiate(engine, memory) {
      if (!this.module) return;
      const { exports } = await WebAssembly.instantiate(this.module, { engine: { memory } });
      const missing = WebAssembly.Module.imports(engine)
        .filter((im) => im.module === "simd" && im.name !== "available" && typeof exports[im.name] !== "function")
        .map((im) => im.name);
      if (missing.length > 0) throw new Error(`simd.wasm exports no ${missing.join(", ")}, which engine.wasm imports`);
      this.x = exports;
    }
  }

  // Instance is one instance of engine.wasm with its WASI, gpu and simd
  // hosts, the browser's counterpart of host.Instance.
  class Instance {
    // create instantiates module with files (path -> Uint8Array, relative
    // to the model dir) mounted read-only at /model, and runs _initialize.
    // device: a GPUDevice or null (CPU). simd: simd.wasm compiled
    // (compileSIMD), or null for the engine's Go kernels. log(level, line)
    // gets stdout and stderr lines.
    static async create(module, { files, device = null, adapterName = "", jspi = false, simd = null, log } = {}) {
      const fs = new MemFS(files);
      const say = log || ((level, l) => console[level === "error" ? "error" : "log"](l));
      const wasi = new WASI({ fs, stdout: (l) => say("log", `engine: ${l}`), stderr: (l) => say("error", `engine: ${l}`) });
      const gpu = new GPUHost({ device, adapterName, fs, jspi });
      const kernels = new SIMDHost(simd);
      const imports = { ...wasi.imports(), ...gpu.imports(), ...kernels.imports(module) };
      checkImports(module, imports);
      const instance = await WebAssembly.instantiate(module, imports);
      await kernels.instantiate(module, instance.exports.memory);
      const e = new Instance(instance, wasi, gpu, fs);
      e.kernels = kernels;
      e.raw("_initialize");
      return e;
    }

    constructor(instance, wasi, gpu, fs) {
      this.instance = instance;
      this.x = instance.exports;
      this.memory = instance.exports.memory;
      this.wasi = wasi;
      this.gpu = gpu;
      this.fs = fs;
      wasi.setMemory(this.memory);
      gpu.setMemory(this.memory);
      this.alive = true;
    }

    // close discards the instance and the GPU buffers it made.
    close() {
      if (!this.alive) return;
      this.alive = false;
      this.gpu.dispose();
      this.instance = null;
      this.x = null;
    }

    fn(name) {
      if (!this.alive) throw new TrapError(CLOSED);
      const f = this.x[name];
      if (typeof f !== "function") throw new Error(`engine.wasm exports no ${name}`);
      return f;
    }

    // trapped discards the instance after an export threw.
    trapped(name, err) {
      const { stderr } = this.wasi.output();
      this.close();
      const why = err instanceof ProcExit ? err.message : `${err && err.name || "Error"}: ${err && err.message || err}`;
      const panic = stderr.lastIndexOf("panic:");
      const tail = panic >= 0 ? `\n${stderr.slice(panic, panic + 2000).trimEnd()}` : "";
      return new TrapError(`${name} trapped, instance discarded (${why}): open the model again${tail}`);
    }

    // raw calls an export and returns its result; a trap discards the
    // instance and throws TrapError.
    raw(name, ...args) {
      const f = this.fn(name);
      try {
        return f(...args);
      } catch (err) {
        throw this.trapped(name, err);
      }
    }

    // call is raw plus the status convention: a negative result throws
    // EngineError with ls_error's message.
    call(name, ...args) {
      const r = this.raw(name, ...args);
      return this.status(name, r);
    }

    status(name, r) {
      if (typeof r === "number" && r < 0) {
        const msg = dec.decode(this.out("ls_error"));
        throw new EngineError(msg.startsWith(name + ":") ? msg : `${name}: ${msg}`);
      }
      return r;
    }

    malloc(n) { return this.raw("ls_malloc", n) >>> 0; }
    free(p) { if (this.alive && p) this.raw("ls_free", p); }

    bytes(p, n) {
      if (p + n > this.memory.buffer.byteLength) throw new Error(`host: [${p}, +${n}) is outside guest memory`);
      return new Uint8Array(this.memory.buffer, p, n);
    }

    // callIn copies data (bytes or a string) into a fresh guest block and
    // calls name(ptr, len).
    callIn(name, data) {
      const b = typeof data === "string" ? enc.encode(data) : data;
      const p = this.malloc(b.length);
      try {
        this.bytes(p, b.length).set(b);
        return this.call(name, p, b.length);
      } finally {
        this.free(p);
      }
    }

    // callInAsync is callIn through WebAssembly.promising (JSPI), for an
    // instance made with jspi: true whose export may suspend in read_buffer.
    async callInAsync(name, data) {
      const b = typeof data === "string" ? enc.encode(data) : data;
      const f = WebAssembly.promising(this.fn(name));
      const p = this.malloc(b.length);
      try {
        this.bytes(p, b.length).set(b);
        let r;
        try {
          r = await f(p, b.length);
        } catch (err) {
          throw this.trapped(name, err);
        }
        return this.status(name, r);
      } finally {
        this.free(p);
      }
    }

    // out calls a length-returning export name(ptr, cap) -> len without
    // the status check (ls_error itself), growing the block until it fits.
    out(name) {
      let cap = 4096;
      for (;;) {
        const p = this.malloc(cap);
        try {
          const n = this.raw(name, p, cap);
          if (n < 0) return null;
          if (n <= cap) return this.bytes(p, n).slice();
          cap = n;
        } finally {
          this.free(p);
        }
      }
    }

    // callOut is out with the status convention.
    callOut(name) {
      let cap = 4096;
      for (;;) {
        const p = this.malloc(cap);
        try {
          const n = this.call(name, p, cap);
          if (n <= cap) return this.bytes(p, n).slice();
          cap = n;
        } finally {
          this.free(p);
        }
      }
    }

    config() {
      const c = this.fs.file("config.json"); // a Uint8Array, or a BlobFile of a local folder
      try { return c ? JSON.parse(dec.decode(c.subarray(0, c.length))) : {}; } catch (e) { return {}; }
    }

    // load puts the files at paths (under /model) in guest memory for
    // ls_open's "files" (wasm/ABI.md), each in an ls_malloc block that the
    // file system then serves, and returns them as {path: address}.
    // progress(loaded, total, path) follows the bytes.
    async load(paths, progress = () => {}) {
      const files = paths.map((path) => ({ path, data: this.fs.file(path) }));
      const total = files.reduce((n, f) => n + f.data.length, 0);
      let loaded = 0;
      const out = {};
      for (const { path, data } of files) {
        const p = this.malloc(data.length);
        if (data instanceof BlobFile) {
          await data.stream((bytes, at) => {
            this.bytes(p + at, bytes.length).set(bytes);
            loaded += bytes.length;
            progress(loaded, total, path);
          });
        } else {
          this.bytes(p, data.length).set(data.subarray(0, data.length));
          loaded += data.length;
          progress(loaded, total, path);
        }
        this.fs.replace(path, new GuestFile(this.memory, p, data.length));
        out[path] = p;
      }
      return out;
    }

    // open calls ls_open and waits for the WebGPU errors of the upload.
    // files: load's value, on the CPU.
    async open({ variant = "f32", capacity = 64, device = "gpu", files } = {}) {
      this.callIn("ls_open", JSON.stringify({ model: "/model", variant, capacity, device, files }));
      if (this.gpu.device) {
        try {
          await this.gpu.settle();
        } catch (e) {
          this.close();
          throw new Error(`ls_open: ${e.message}`);
        }
      }
    }

    // run sends a request and drives the split-step loop (wasm/ABI.md):
    // ls_step; ls_region; read the region (GPU: copy to a MAP_READ buffer
    // and await mapAsync; CPU, buffer 0: guest memory at offset) into a
    // piece of its own; ls_feed it back through one reused guest block.
    // The value's pieces are the rows, a region's at a time, in order:
    // whoever wants them whole joins them once (bridge.js), where a buffer
    // grown by doubling here held twice the rows beside the garbage of its
    // earlier sizes, in the worker that holds the model.
    // A prefill chunk (ls_step 2) has nothing to read: with onPrefill, the
    // host waits for the device to finish it and passes on ls_progress
    // ({done, total} input tokens), before the first chunk too, so that a
    // long prefill shows how far it came.
    async run(request, { onRows, onPrefill } = {}) {
      const t0 = performance.now();
      this.callIn("ls_request", typeof request === "string" ? request : JSON.stringify(request));
      const pieces = []; // each region's rows, as read
      let nrows = 0;
      let width = 0; // float32 per row: the logits, then a mixture of experts' routes
      let firstRowMs = null;
      const regP = this.malloc(24); // ls_region's 24 bytes; ls_progress uses the first 8
      let feedP = 0;
      let feedCap = 0;
      const prefill = () => {
        this.call("ls_progress", regP);
        const dv = new DataView(this.memory.buffer, regP, 8);
        onPrefill({ done: dv.getUint32(0, true), total: dv.getUint32(4, true) });
      };
      try {
        if (onPrefill) prefill();
        for (;;) {
          const r = this.call("ls_step");
          if (r === 0) break;
          if (r === 2) {
            if (onPrefill) {
              if (this.gpu.device) await this.gpu.device.queue.onSubmittedWorkDone();
              prefill();
            }
            continue;
          }
          this.call("ls_region", regP);
          const dv = new DataView(this.memory.buffer, regP, 24);
          const buffer = dv.getUint32(0, true);
          const offset = Number(dv.getBigUint64(4, true));
          const size = Number(dv.getBigUint64(12, true));
          const n = dv.getUint32(20, true);
          if (n > 0) width = size / 4 / n;
          const dest = new Uint8Array(size);
          pieces.push(dest);
          if (buffer === 0) {
            dest.set(this.bytes(offset, size)); // device "cpu": the rows are in guest memory
          } else {
            await this.gpu.read(buffer, offset, size, dest);
          }
          if (firstRowMs === null) firstRowMs = performance.now() - t0;
          if (size > feedCap) {
            this.free(feedP);
            feedP = 0;
            feedP = this.malloc(size);
            feedCap = size;
          }
          this.bytes(feedP, size).set(dest);
          this.call("ls_feed", feedP, size);
          nrows += n;
          if (onRows) onRows(nrows);
        }
        const result = JSON.parse(dec.decode(this.callOut("ls_result")));
        // The rows stay as the engine wrote them; result.vocab and
        // result.routes say how to split them (wasm/ABI.md).
        const vocab = result.vocab || this.config().vocab_size || 0;
        if (!width) width = vocab + (result.routes ? result.routes.layers.length * result.routes.top_k : 0);
        return { result, vocab, width, pieces, firstRowMs: firstRowMs ?? 0, ms: performance.now() - t0 };
      } finally {
        if (this.alive) {
          this.free(regP);
          this.free(feedP);
        }
      }
    }
  }

  // Model files -------------------------------------------------------------

  async function listModels() {
    let r;
    try {
      r = await fetch("/models/", { cache: "no-cache" });
    } catch (e) {
      throw new Error(`/models/: ${e.message}`);
    }
    if (!r.ok) throw new Error(`/models/: HTTP ${r.status}`);
    return r.json();
  }

  async function findModel(name) {
    const list = await listModels();
    const m = list.find((x) => x.name === name);
    if (!m) throw new Error(`model ${name}: the server has no such model (it has ${list.map((x) => x.name).join(", ") || "none"})`);
    if (!Array.isArray(m.files)) throw new Error(`model ${name}: the server's /models/ lists no files for it`);
    return m;
  }

  // LOCAL marks a variant read from the user's disk ("local:NAME.gguf")
  // or a model folder ("local:NAME/"): the page hands the worker the Files
  // themselves.
  const LOCAL = "local:";
  const isGGUF = (p) => /\.gguf$/i.test(p);
  // isWeights says whether a top-level file holds weights: the checkpoint's
  // safetensors (and their index) or a GGUF file.
  const isWeights = (p) => /\.safetensors$/i.test(p) || p === "model.safetensors.index.json" || isGGUF(p);
  // isHub says whether a variant is a hub checkpoint under the model's
  // hub/ (GPTQ, AWQ, compressed-tensors, MLX, bitsandbytes: quantize
  // --format writes them there), which engine.wasm opens as hub/DIR.
  const isHub = (v) => /^hub\/[^/]+$/.test(v);

  // selectFiles is what an open of variant needs: only the files
  // engine.wasm reads. f32: the checkpoint's top-level files but the
  // GGUFs. A GGUF (a served file's name, or local:NAME): the top-level
  // files but the weights (engine.wasm opens the checkpoint without them:
  // config, generation config and tokenizer files), and the served GGUF
  // itself. A scheme: variants/<variant>/* and the top-level files but the
  // weights too, since the variant holds every tensor and its manifest
  // names the checkpoint's fingerprint (wasm/ABI.md, ls_open). So a q4 or
  // Q4_K_M side never downloads the bf16 safetensors, several times its
  // size. A model folder from this computer keeps its safetensors for a
  // scheme: read in place, they cost no memory, and engine.wasm checks
  // the variant against them (held says they are not held). A hub
  // checkpoint: hub/DIR/* and the top-level files but the weights, as for
  // a GGUF (engine.wasm checks it against the checkpoint's config and
  // tokenizer, not its weights).
  function selectFiles(model, variant) {
    const top = (f) => !f.path.includes("/");
    if (isGGUF(variant)) {
      return model.files.filter((f) => top(f) && (!isWeights(f.path) || f.path === variant));
    }
    if (isHub(variant)) {
      return model.files.filter((f) => (top(f) && !isWeights(f.path)) || f.path.startsWith(`${variant}/`));
    }
    if (variant === "f32") return model.files.filter((f) => top(f) && !isGGUF(f.path));
    const prefix = `variants/${variant}/`;
    const weights = (p) => model.local ? isGGUF(p) : isWeights(p);
    return model.files.filter((f) => (top(f) && !weights(f.path)) || f.path.startsWith(prefix));
  }

  // held says whether an open of variant holds file f in memory, as the
  // budget counts it: every fetched file (the engine keeps the weights it
  // opens, and the small files are read whole), and a local folder's too,
  // but its safetensors beside a variant, which engine.wasm only hashes.
  const held = (model, variant, f) => !(model.local && variant !== "f32" && !isGGUF(variant) && !isHub(variant) && isWeights(f.path));

  // inGuest says whether the CPU path's open of variant reads file f into
  // guest memory first (Instance.load): the files it takes its weights
  // from, a variant's shards, a GGUF or the checkpoint's safetensors, where
  // it holds them. Not a hub checkpoint's: engine.wasm transcodes them
  // into lookup matrices as it reads them, through the files.
  const inGuest = (model, variant, f) => held(model, variant, f) && !isHub(variant) && /\.(safetensors|gguf|bin)$/i.test(f.path);

  // localModel is a model folder the user chose ("local:NAME/") in the
  // shape findModel gives a served one, each file with the File it is read
  // from. folder: [{path, file}], paths relative to the folder (the page
  // passes the files a server would serve of a model directory).
  function localModel(model, folder) {
    const name = model.slice(LOCAL.length, -1);
    if (!model.endsWith("/") || !name || name.includes("/")) throw new Error(`open: ${model}: a local model is local:NAME/`);
    if (!Array.isArray(folder) || folder.length === 0) throw new Error(`open: folder ${name}: no files were given for it (choose the folder again)`);
    const files = [];
    for (const { path, file } of folder) {
      if (typeof Blob === "undefined" || !(file instanceof Blob)) throw new Error(`open: folder ${name}: ${path} is not a file`);
      files.push({ path, size: file.size, file });
    }
    return { name, files, local: true };
  }

  // inFolder says an engine message of a local folder the way the user
  // knows it: the folder's name where engine.wasm says its mount, /model.
  const inFolder = (name, msg) => msg.replace(/\/model(?=\/|\b)/g, () => name);

  // fetchFiles fetches files [{path, size, sha256}] of model name into a
  // Map path -> BlobFile (or Uint8Array), through Cache Storage
  // (modelcache.js): a hit reads no network; a miss is fetched, checked
  // against size and sha256, and stored. In a worker each file is mounted
  // as a BlobFile over the Blob Cache Storage keeps on disk, so the worker
  // holds no copy of the weights beside the engine's (GPU buffers, or
  // guest memory on the CPU path): a download lives whole only until it
  // is stored. On a page (no FileReaderSync), without Cache Storage or
  // with useCache false (fetch, check, keep nothing), the bytes are held.
  // onProgress gets {phase: "fetch", message, loaded, total} in bytes;
  // cached bytes count as loaded.
  async function fetchFiles(name, files, { onProgress, log, useCache = true } = {}) {
    const note = log || ((l) => console.warn(l));
    const total = files.reduce((n, f) => n + f.size, 0);
    let loaded = 0;
    let cachedBytes = 0;
    const report = throttled((message) => onProgress && onProgress({ phase: "fetch", message, loaded, total }));
    const out = new Map();
    for (const f of files) {
      const { data, cached } = await LogitscopeModelCache.get(name, f, {
        note, useCache, progress: (n) => { loaded += n; report(false, f.path); },
      });
      if (cached) {
        cachedBytes += f.size;
        report(false, `${f.path} (cached)`);
      }
      if (data instanceof Uint8Array) out.set(f.path, data);
      else if (typeof FileReaderSync !== "undefined") out.set(f.path, new BlobFile(data, `${name}/${f.path}`, "the browser's cached copy"));
      else out.set(f.path, new Uint8Array(await data.arrayBuffer()));
    }
    report(true, "done");
    return { files: out, bytes: total, cachedBytes };
  }

  // throttled passes f's calls on at most one every 100 ms, and each one
  // whose first argument, force, is true (a last report): progress reports
  // come per chunk, far more often than a page can show them.
  function throttled(f) {
    let last = 0;
    return (force, ...args) => {
      const now = performance.now();
      if (!force && now - last < 100) return;
      last = now;
      f(...args);
    };
  }

  // compileEngine fetches and compiles engine.wasm, or the wasm module at
  // url (simd.wasm), streaming where the server says application/wasm.
  async function compileEngine(url = ENGINE_URL) {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    if (WebAssembly.compileStreaming && (r.headers.get("Content-Type") || "").startsWith("application/wasm")) {
      return WebAssembly.compileStreaming(r);
    }
    return WebAssembly.compile(await r.arrayBuffer());
  }

  // warmUp runs each of simd.wasm's kernels a little on a memory of its
  // own, zeros (about 10 ms). V8 first runs a module's functions as its
  // baseline compiler made them and optimizes each, in the background,
  // once it has run a while, and the optimized code serves every instance
  // of the module: warmed up, the kernels are optimized by the time the
  // engine runs. Without it, a first run (in node, under load) spent up to
  // twice as long in the kernels as a later one.
  async function warmUp(module) {
    const memory = new WebAssembly.Memory({ initial: 16 }); // 1 MiB
    const { exports: k } = await WebAssembly.instantiate(module, { engine: { memory } });
    // 64 rows of 896 columns (28 groups or blocks): codes and scales at
    // 0, x at 64 KiB, out after it, float32 rows and decoded rows from
    // 128 KiB.
    const rows = 64, cols = 896, groups = cols / 32, x = 65536, out = x + 4 * cols, w = 131072;
    for (let i = 0; i < 16; i++) {
      k.q4_rows(0, 16 * groups, 0, 2 * groups, groups, x, out, rows);
      k.q8_rows(0, 32 * groups, 0, 2 * groups, groups, x, out, rows);
      k.q4_decode(0, 16 * groups, 0, 2 * groups, groups, w, 4 * cols, rows);
      k.q8_decode(0, 32 * groups, 0, 2 * groups, groups, w, 4 * cols, rows);
      k.q4_0_rows(0, 18 * groups, groups, x, out, rows);
      k.q8_0_rows(0, 34 * groups, groups, x, out, rows);
      k.q4_0_decode(0, 18 * groups, groups, w, 4 * cols, rows);
      k.q8_0_decode(0, 34 * groups, groups, w, 4 * cols, rows);
      k.f32_rows(w, 4 * cols, x, cols, out, rows);
      for (let t = 0; t < 16; t++) k.tile4x4(w, 4 * cols, w + 16 * cols, 4 * cols, cols, out, out + 1024, 3);
    }
  }

  // compileSIMD compiles simd.wasm, or says why not and returns null (the
  // engine then runs its Go kernels): a browser without SIMD128 cannot
  // compile it.
  async function compileSIMD(url = SIMD_URL) {
    try {
      const module = await compileEngine(url);
      await warmUp(module);
      return module;
    } catch (e) {
      console.warn(`logitscope: simd.wasm: ${e.message}: the CPU path runs without SIMD kernels`);
      return null;
    }
  }

  global.LogitscopeHost = {
    Instance, EngineError, TrapError, listModels, findModel, selectFiles, fetchFiles, compileEngine, compileSIMD,
    fmtBytes, CACHE_NAME, DEFAULT_BUDGET, LOCAL,
  };

  if (!inWorker) return;

  // The worker ---------------------------------------------------------------

  // What the worker writes to its console goes to the page instead, which
  // prints it as "[worker] …" on its own console: the page sees it, and a
  // test reading the page's console (which the DevTools protocol also
  // reports worker console entries to) sees it once.
  for (const level of ["log", "info", "warn", "error"]) {
    const orig = console[level].bind(console);
    console[level] = (...a) => {
      try {
        global.postMessage({ log: { level, text: a.map((x) => (typeof x === "string" ? x : x && x.stack || String(x))).join(" ") } });
      } catch (e) {
        orig(...a);
      }
    };
  }

  let module = null; // engine.wasm, compiled once per worker
  let simd = null; // simd.wasm, compiled with it (null: none)
  let gpu = null; // {device, name}: requested once, again after a loss
  let engine = null;
  let onnx = null; // an onnx side (ortside.js) open instead of engine
  let discarded = ""; // why the last instance went away
  let busy = null;

  async function getDevice() {
    if (gpu && !gpu.lost) return gpu;
    const g = await requestDevice();
    g.lost = false;
    g.device.lost.then(() => { g.lost = true; });
    gpu = g;
    return g;
  }

  const ops = {
    async probe() {
      return { value: await probe() };
    },

    // open {model, variant, capacity, device: "auto"|"gpu"|"cpu", budget,
    // file, folder}: file is the File of a variant "local:NAME.gguf";
    // folder the files of a model "local:NAME/" ([{path, file}]). Both are
    // read from the user's disk where they lie (BlobFile), never fetched,
    // held whole or sent anywhere.
    async open(args, progress) {
      const t0 = performance.now();
      const name = args.model;
      const variant = args.variant || "f32";
      const capacity = args.capacity || 64;
      const want = args.device || "auto";
      const budget = args.budget || DEFAULT_BUDGET;
      if (!name) throw new Error("open: no model named");
      if (!["auto", "gpu", "cpu"].includes(want)) throw new Error(`open: device ${JSON.stringify(want)}: want "auto", "gpu" or "cpu"`);
      let local = null; // {name, data: BlobFile}
      if (variant.startsWith(LOCAL)) {
        const fname = variant.slice(LOCAL.length);
        if (!isGGUF(fname) || fname.includes("/")) throw new Error(`open: ${variant}: a local variant is a .gguf file`);
        if (typeof Blob === "undefined" || !(args.file instanceof Blob)) throw new Error(`open: ${variant}: no file was given for it (choose it again)`);
        local = { name: fname, data: new BlobFile(args.file, fname) };
      }
      if (engine) {
        engine.close();
        engine = null;
      }
      if (onnx) {
        onnx.close();
        onnx = null;
      }
      if (global.LogitscopeORT.isONNX(variant)) {
        const { side, value } = await global.LogitscopeORT.ORTSide.open({ name, variant, want, budget, progress, host: global.LogitscopeHost });
        onnx = side;
        discarded = "";
        return { value };
      }
      const model = name.startsWith(LOCAL) ? localModel(name, args.folder) : await findModel(name);
      const files = selectFiles(model, local ? local.name : variant).filter((f) => !local || f.path !== local.name);
      // The budget bounds what a side takes in memory: engine.wasm holds
      // the weights it opens (GPU buffers, or guest memory on the CPU
      // path, as stored both), whether they were fetched (the worker keeps
      // no copy: fetchFiles) or lie on this computer (held).
      const bytes = files.reduce((n, f) => n + (held(model, variant, f) ? f.size : 0), 0) + (local ? local.data.length : 0);
      if (bytes > budget) {
        const what = model.local ? `folder ${model.name}` : `model ${name}`;
        const why = model.local || local ? " (files from this computer are read where they lie, but the engine holds the weights it opens: GPU buffers, or their bytes on the CPU path)" : "";
        throw new Error(`${what} (${variant}): its files take ${fmtBytes(bytes)}, more than this page's memory budget of ${fmtBytes(budget)}${why}`);
      }
      // The device first: "gpu" without WebGPU fails before any download.
      let g = null;
      if (want !== "cpu") {
        try {
          g = await getDevice();
        } catch (e) {
          if (want === "gpu") throw e;
          console.warn(`logitscope: no WebGPU, using the CPU: ${e.message}`);
        }
      }
      let fetched;
      if (model.local) {
        fetched = { files: new Map(files.map((f) => [f.path, new BlobFile(f.file, `${model.name}/${f.path}`)])), cachedBytes: 0 };
      } else {
        progress({ phase: "fetch", message: `${files.length} files`, loaded: 0, total: bytes });
        fetched = await fetchFiles(name, files, { onProgress: progress });
      }
      if (local) fetched.files.set(local.name, local.data);
      if (!module) {
        progress({ phase: "compile", message: "engine.wasm", loaded: 0, total: 0 });
        [module, simd] = await Promise.all([compileEngine(), compileSIMD()]);
      }
      const what = local ? `${local.name} from this computer's disk (nothing is uploaded)` : variant;
      const whose = model.local ? `folder ${model.name} (from this computer's disk, nothing is uploaded)` : name;
      const opening = () => progress({ phase: "open", message: `${whose} ${what} on ${g ? g.name : "the CPU"}`, loaded: 0, total: 0 });
      if (g) opening();
      const e = await Instance.create(module, { files: fetched.files, device: g ? g.device : null, adapterName: g ? g.name : "", simd });
      try {
        let inMemory; // the CPU's weights, read into guest memory first
        if (!g) {
          const paths = files.filter((f) => inGuest(model, variant, f)).map((f) => f.path);
          if (local) paths.push(local.name);
          const send = throttled((message, loaded, total) => progress({ phase: "load", message, loaded, total }));
          inMemory = await e.load(paths, (loaded, total, path) => send(loaded === total, path, loaded, total));
          opening();
        }
        await e.open({ variant: local ? local.name : variant, capacity, device: g ? "gpu" : "cpu", files: inMemory });
      } catch (err) {
        e.close(); // its GPU buffers now, not at the next collection
        if (model.local) err.message = inFolder(model.name, err.message);
        throw err;
      }
      engine = e;
      discarded = "";
      return {
        value: {
          device: g ? "webgpu" : "cpu", adapter: g ? g.name : "", simd: !!simd, bytes, cachedBytes: fetched.cachedBytes,
          vocab: e.config().vocab_size || 0, ms: performance.now() - t0,
        },
      };
    },

    // run <wasm/abi.Request> -> {result, vocab, width, rows, firstRowMs, ms}
    async run(request, progress) {
      if (onnx) {
        const { pieces, ...out } = await onnx.run(request, { onRows: (n) => progress({ phase: "rows", message: "", loaded: n, total: 0 }) });
        out.rows = pieces.map((p) => p.buffer);
        return { value: out, transfer: out.rows };
      }
      if (!engine || !engine.alive) {
        throw new Error(discarded || "run: no model open (call open first)");
      }
      try {
        const { pieces, ...out } = await engine.run(request, {
          onRows: (n) => progress({ phase: "rows", message: "", loaded: n, total: 0 }),
          onPrefill: ({ done, total }) => progress({ phase: "prefill", message: "tokens", loaded: done, total }),
        });
        out.rows = pieces.map((p) => p.buffer);
        return { value: out, transfer: out.rows };
      } catch (e) {
        // A trap leaves the Go runtime unusable and a WebGPU error leaves the
        // device state unknown: both discard the instance. An engine error
        // (ls_error) does not.
        if (!(e instanceof EngineError)) {
          discarded = `run: the engine instance was discarded after an earlier failure: open the model again (${e.message.split("\n")[0]})`;
          engine.close();
          engine = null;
        }
        throw e;
      }
    },
  };

  global.onmessage = async (ev) => {
    const { id, op, args } = ev.data || {};
    if (busy) {
      global.postMessage({ id, ok: false, error: `${op}: the engine worker is busy with ${busy} (one call at a time)` });
      return;
    }
    const f = ops[op];
    if (!f) {
      global.postMessage({ id, ok: false, error: `unknown op ${JSON.stringify(op)}` });
      return;
    }
    busy = op;
    const progress = (p) => global.postMessage({ id, progress: p });
    try {
      const { value, transfer } = await f(args || {}, progress);
      global.postMessage({ id, ok: true, value }, transfer || []);
    } catch (e) {
      global.postMessage({ id, ok: false, error: e && e.message || String(e) });
    } finally {
      busy = null;
    }
  };
})(self);
