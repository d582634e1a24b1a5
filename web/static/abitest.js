// abitest.js: the cases of host/abi_test.go (and host/cpu_test.go's CPU
// cases) against the browser host, with the same names, on the server's
// model ?model=NAME (default "demo"; the Go test serves it the synthetic
// tiny preset that host/abi_test.go's fixture is). Results:
// window.abiResults = [{name, ok, message, ms}], window.abiInfo (the gpu
// info import's JSON and more), window.identical (runs through the bridge,
// for the Go test to compare with wazero), and document.body.dataset.state
// = "done" ("error" if the page could not run the cases at all).
"use strict";

(async function () {
  const { Instance, findModel, fetchFiles, compileEngine, compileSIMD, CACHE_NAME } = self.LogitscopeHost;
  const { requestDevice, READ_BUFFER_UNAVAILABLE } = self.LogitscopeGPU;
  const MODEL = new URLSearchParams(location.search).get("model") || "demo";
  const results = [];
  window.abiResults = results;
  window.identical = {};
  const tbody = document.getElementById("results");
  const summary = document.getElementById("summary");

  function show(r) {
    const tr = document.createElement("tr");
    for (const [text, cls] of [[r.name, ""], [r.ok ? "ok" : "FAIL", r.ok ? "ok" : "fail"], [String(Math.round(r.ms)), ""], [r.message, "msg"]]) {
      const td = document.createElement("td");
      td.textContent = text;
      if (cls) td.className = cls;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }

  class Fail extends Error {}
  const fail = (msg) => { throw new Fail(msg); };
  const catchErr = async (f) => {
    try {
      await f();
      return null;
    } catch (e) {
      return e;
    }
  };
  function wantErr(err, want) {
    if (!err || !String(err.message).includes(want)) {
      fail(`error ${err ? JSON.stringify(err.message) : "nil"}, want one containing ${JSON.stringify(want)}`);
    }
  }
  const equalInts = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  // rowsOf counts the rows in Instance.run's pieces of float32 rows of width.
  const rowsOf = (pieces, width) => pieces.reduce((n, p) => n + p.length, 0) / 4 / width;
  // samePieces says whether two runs' pieces hold the same bytes.
  const samePieces = (a, b) => {
    const flat = (ps) => ps.flatMap((p) => Array.from(p));
    const x = flat(a), y = flat(b);
    return x.length === y.length && x.every((v, i) => v === y[i]);
  };

  async function runCase(name, f) {
    const t = { cleanup: [], notes: [] };
    t.log = (s) => t.notes.push(s);
    const t0 = performance.now();
    let ok = true;
    let message = "";
    try {
      await f(t);
    } catch (e) {
      ok = false;
      message = e instanceof Fail ? e.message : `${e && e.name}: ${e && e.message}\n${e && e.stack || ""}`;
    }
    for (const c of t.cleanup.reverse()) {
      try { await c(); } catch (e) { console.error(`${name}: cleanup:`, e); }
    }
    if (ok) message = t.notes.join("\n");
    const r = { name, ok, message, ms: performance.now() - t0 };
    results.push(r);
    show(r);
    console.log(`abitest: ${ok ? "ok  " : "FAIL"} ${name} (${Math.round(r.ms)} ms)${ok ? "" : ": " + message}`);
    return r;
  }

  // abitest.html?nowebgpu: in a browser without WebGPU, the bridge's
  // fallback and messages.
  async function withoutWebGPU() {
    const bridge = new LogitscopeBridge();
    const request = { mode: "greedy", prompt_ids: [1, 2, 3, 4, 5], max_new: 3, stops: [] };
    await runCase("no WebGPU: probe says why", async (t) => {
      const p = await bridge.probe();
      if (p.webgpu || !p.reason) fail(`probe: ${JSON.stringify(p)}`);
      t.log(p.reason);
    });
    await runCase("no WebGPU: device gpu fails, naming why, before any download", async (t) => {
      await caches.delete(CACHE_NAME);
      const err = await catchErr(() => bridge.open({ model: MODEL, variant: "q4", capacity: 64, device: "gpu" }));
      wantErr(err, "WebGPU");
      wantErr(err, "device \"cpu\"");
      const cache = await caches.open(CACHE_NAME);
      const keys = await cache.keys();
      if (keys.length) fail(`a refused open downloaded ${keys.length} files`);
      t.log(err.message);
    });
    await runCase("no WebGPU: device auto runs on the CPU", async (t) => {
      const o = await bridge.open({ model: MODEL, variant: "q4", capacity: 64, device: "auto" });
      if (o.device !== "cpu" || o.adapter !== "") fail(`open: ${JSON.stringify(o)}`);
      if (!o.simd) fail(`open: the CPU path has no SIMD kernels (simd.wasm): ${JSON.stringify(o)}`);
      const out = await bridge.run(request);
      if (out.rows.length !== 3 * out.width || out.result.output.length !== 3) fail(`run: ${JSON.stringify(out.result)}`);
    });
    bridge.terminate();
  }

  try {
    document.body.dataset.state = "running";
    const t0 = performance.now();
    if (new URLSearchParams(location.search).has("nowebgpu")) {
      await withoutWebGPU();
      const bad = results.filter((r) => !r.ok);
      summary.textContent = `${results.length - bad.length}/${results.length} cases ok`;
      document.body.dataset.state = "done";
      return;
    }
    const model = await findModel(MODEL);
    // Every file of the model; the ABI cases mount what host/abi_test.go's
    // fixture has: the checkpoint and its q4 variant only (no q8).
    const all = await fetchFiles(MODEL, model.files, { useCache: false });
    const q4Files = new Map([...all.files].filter(([p]) => !p.includes("/") || p.startsWith("variants/q4/")));
    const gpu = await requestDevice();
    const [module, simd] = await Promise.all([compileEngine(), compileSIMD()]);
    const jspi = typeof WebAssembly.Suspending === "function" && typeof WebAssembly.promising === "function";
    const imports = WebAssembly.Module.imports(module).map((i) => `${i.module}.${i.name}`);
    const setupMs = performance.now() - t0;

    // newEngine instantiates engine.wasm with the fixture files mounted and
    // the WebGPU device (jspi: read_buffer served through JSPI).
    const newEngine = async (t, { jspi = false } = {}) => {
      const e = await Instance.create(module, { files: q4Files, device: gpu.device, adapterName: gpu.name, jspi, simd });
      t.cleanup.push(() => e.close());
      return e;
    };
    // fresh is an instance with no model open; open opens variant v on
    // device ("gpu" or "cpu") with capacity tokens (128 as in host/abi_test.go).
    const fresh = (t, opts) => newEngine(t, opts);
    const open = async (t, v, { capacity = 128, device = "gpu", jspi = false } = {}) => {
      const e = await newEngine(t, { jspi });
      await e.open({ variant: v, capacity, device });
      return e;
    };

    // The gpu info import, as the engine sees it.
    const infoEngine = await Instance.create(module, { files: q4Files, device: gpu.device, adapterName: gpu.name });
    const info = JSON.parse(JSON.stringify(infoEngine.gpu.info()));
    infoEngine.close();
    window.abiInfo = { info, adapter: gpu.name, jspi, imports, setupMs, userAgent: navigator.userAgent };
    document.getElementById("info").textContent =
      `adapter: ${gpu.name}\ninfo: ${JSON.stringify(info)}\nJSPI: ${jspi}\nimports: ${imports.length}`;

    const cases = [
      ["ls_open bad JSON", async (t) => {
        const e = await fresh(t);
        wantErr(await catchErr(() => e.callIn("ls_open", `{"model":`)), "ls_open: unexpected end of JSON");
      }],
      ["ls_open unknown variant", async (t) => {
        wantErr(await catchErr(() => open(t, "q3", { capacity: 64 })), `variant "q3"`);
      }],
      ["ls_open missing variant", async (t) => {
        wantErr(await catchErr(() => open(t, "q8", { capacity: 64 })), "no variant at /model/variants/q8");
      }],
      ["ls_open pointer outside ls_malloc blocks", async (t) => {
        const e = await fresh(t);
        wantErr(await catchErr(() => e.call("ls_open", 8, 16)), "not inside a block from ls_malloc");
        if (!e.alive) fail("a refused pointer discarded the instance");
      }],
      ["ls_request before ls_open", async (t) => {
        const e = await fresh(t);
        wantErr(await catchErr(() => e.callIn("ls_request", `{"mode":"panel"}`)), "no model open");
      }],
      ["ls_request unknown mode", async (t) => {
        const e = await open(t, "f32");
        wantErr(await catchErr(() => e.callIn("ls_request", `{"mode":"beam"}`)), `mode "beam"`);
      }],
      ["ls_step before ls_request", async (t) => {
        const e = await open(t, "f32");
        wantErr(await catchErr(() => e.call("ls_step")), "no request");
      }],
      ["ls_region and ls_result before ls_request", async (t) => {
        const e = await open(t, "f32");
        const p = e.malloc(24);
        wantErr(await catchErr(() => e.call("ls_region", p)), "no region pending");
        wantErr(await catchErr(() => e.callOut("ls_result")), "no request");
      }],
      ["ls_step twice without ls_feed", async (t) => {
        const e = await open(t, "f32");
        e.callIn("ls_request", `{"mode":"panel","windows":[[1,2,3]]}`);
        const r = e.call("ls_step");
        if (r !== 1) fail(`ls_step = ${r}; want 1`);
        wantErr(await catchErr(() => e.call("ls_step")), "not fed back");
      }],
      ["ls_feed wrong length", async (t) => {
        const e = await open(t, "f32");
        e.callIn("ls_request", `{"mode":"greedy","prompt_ids":[1,2],"max_new":1}`);
        e.call("ls_step");
        wantErr(await catchErr(() => e.callIn("ls_feed", new Uint8Array(12))), "ls_feed: 12 bytes, the region holds 2048");
      }],
      ["ls_feed without region", async (t) => {
        const e = await open(t, "f32");
        wantErr(await catchErr(() => e.callIn("ls_feed", new Uint8Array(4))), "no region pending");
      }],
      ["greedy text prompt through ChatML", async (t) => {
        const e = await open(t, "q4");
        const { result: res, pieces, width } = await e.run({ mode: "greedy", text: "Hello", max_new: 3, stops: [] });
        const nrows = rowsOf(pieces, width);
        if (res.prompt_ids.length < 10 || res.output.length !== 3 || nrows !== 3 || !res.done) {
          fail(`result ${JSON.stringify(res)} with ${nrows} rows`);
        }
        const r = e.call("ls_step");
        if (r !== 0) fail(`ls_step after done = ${r}; want 0`);
      }],
      ["ls_probe: every import", async (t) => {
        // The probe reads back through read_buffer, which the browser host
        // can serve only through JSPI (a test-only instance: the engine
        // never calls it). Without JSPI the probe must stop there.
        const e = await open(t, "q4", { jspi });
        if (!jspi) {
          wantErr(await catchErr(() => e.callIn("ls_probe", "/model/config.json")), READ_BUFFER_UNAVAILABLE);
          t.log("no JSPI in this browser: the probe stopped at read_buffer, as it should");
          return;
        }
        await e.callInAsync("ls_probe", "/model/config.json");
        const missing = ["info", "create_buffer", "write_buffer", "destroy_buffer", "create_shader_module",
          "create_compute_pipeline", "create_bind_group", "destroy_bind_group", "dispatch", "copy_buffer", "submit",
          "read_buffer", "upload_file"].filter((n) => !e.gpu.counts[n]);
        if (missing.length) fail(`imports never reached the host: ${missing.join(", ")}`);
        t.log(`calls: ${JSON.stringify(e.gpu.counts)}`);
      }],
      ["upload_file outside the mount", async (t) => {
        const probe = async (e, path) => (jspi ? e.callInAsync("ls_probe", path) : e.callIn("ls_probe", path));
        if (!jspi) {
          t.log("no JSPI: the probe cannot reach upload_file in this browser");
          return;
        }
        const e1 = await open(t, "f32", { jspi });
        wantErr(await catchErr(() => probe(e1, "/etc/passwd")), "open /etc/passwd"); // WASI has no such file
        const e2 = await open(t, "f32", { jspi });
        if (!(await catchErr(() => probe(e2, "/model/../config.json")))) fail("a path escaping the mount was served");
      }],
      ["out-of-range handle: import error reaches ls_error", async (t) => {
        const e = await newEngine(t);
        e.gpu.badHandle = true;
        const err = await catchErr(() => e.open({ variant: "f32", capacity: 64 }));
        wantErr(err, "ls_open: ");
        t.log(err.message.split("\n")[0]);
      }],
      ["trap discards the instance; the next Open works", async (t) => {
        const e = await open(t, "f32");
        wantErr(await catchErr(() => e.call("ls_trap")), "ls_trap trapped, instance discarded");
        wantErr(await catchErr(() => e.run({ mode: "greedy", prompt_ids: [1, 2], max_new: 1 })), "the engine instance is closed");
        const e2 = await open(t, "f32");
        const { result } = await e2.run({ mode: "greedy", prompt_ids: [1, 2], max_new: 2, stops: [] });
        if (result.output.length !== 2) fail(`after a trap, a new instance gave ${JSON.stringify(result.output)}`);
      }],

      // Browser-only cases.
      ["read_buffer without JSPI: status -1 and the message reaches ls_error", async (t) => {
        const e = await open(t, "f32");
        wantErr(await catchErr(() => e.callIn("ls_probe", "/model/config.json")), READ_BUFFER_UNAVAILABLE);
        if (!e.alive) fail("a failing import discarded the instance");
      }],
      ["WebGPU validation error fails the next readback", async (t) => {
        // A shader that does not compile: create_shader_module succeeds
        // (WebGPU validates asynchronously); the error surfaces at settle.
        const e = await fresh(t);
        const g = e.gpu.imports().gpu;
        const bad = new TextEncoder().encode("this is not WGSL");
        const p = e.malloc(bad.length);
        e.bytes(p, bad.length).set(bad);
        const h = g.create_shader_module(p, 0, p, bad.length);
        if (h <= 0) fail(`create_shader_module = ${h}, want a handle (the error is asynchronous)`);
        const err = await catchErr(() => e.gpu.settle());
        wantErr(err, "create_shader_module");
        t.log(err.message.split("\n")[0]);
      }],
      ["bad handles and guest ranges fail with -1, never a trap", async (t) => {
        const e = await fresh(t);
        const g = e.gpu.imports().gpu;
        const msg = () => e.gpu.lastError;
        const expect = (r, want) => {
          if (r !== -1 || !msg().includes(want)) fail(`status ${r}, last_error ${JSON.stringify(msg())}; want -1 and ${JSON.stringify(want)}`);
        };
        expect(g.write_buffer(7, 0n, 0, 4), "unknown buffer handle 7");
        expect(g.write_buffer(0, 0n, 0, 4), "buffer handle 0 is never valid");
        expect(g.create_buffer(0x7ffffff0, 64, 16n), "outside guest memory");
        expect(g.dispatch(3, 0, 0, 1, 1, 1), "unknown pipeline handle 3");
        expect(g.copy_buffer(1, 0n, 2, 0n, 4n), "copy_buffer source: unknown buffer handle 1");
        const p = e.malloc(8);
        const b = g.create_buffer(p, 0, 10n);
        if (b <= 0) fail(`create_buffer = ${b}`);
        expect(g.write_buffer(b, 8n, p, 8), "range [8, 16) is outside its 12 bytes");
        expect(g.upload_file(b, 0n, p, 0, 0n, 4n), "is not a file under /model");
        g.destroy_buffer(b);
        expect(g.write_buffer(b, 0n, p, 4), `buffer handle ${b} was destroyed`);
      }],

      // CPU cases (host/cpu_test.go): "device":"cpu" computes in guest
      // memory; ls_region names buffer 0.
      ["cpu: greedy and panel call no gpu import", async (t) => {
        const e = await open(t, "q4", { device: "cpu", capacity: 64 });
        const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 500);
        const g = await e.run({ mode: "greedy", prompt_ids: prompt, max_new: 3, stops: [] });
        if (rowsOf(g.pieces, g.width) !== 3 || g.result.output.length !== 3) {
          fail(`greedy on the CPU: ${rowsOf(g.pieces, g.width)} rows, output ${JSON.stringify(g.result.output)}`);
        }
        await e.run({ mode: "panel", windows: [[1, 2, 3, 4], [5, 6, 7]] });
        if (Object.keys(e.gpu.counts).length !== 0) fail(`the CPU path called gpu imports: ${JSON.stringify(e.gpu.counts)}`);
        // Its products ran in simd.wasm: q4's fused rows, prefill's
        // decoded rows and tiles.
        const c = e.kernels.calls;
        if (!(c.q4_rows > 0 && c.q4_decode > 0 && c.tile4x4 > 0)) fail(`the CPU path's SIMD kernels were not called: ${JSON.stringify(c)}`);
      }],
      ["cpu: weights read into guest memory (ls_open files) give the same rows, in place", async (t) => {
        const request = { mode: "greedy", prompt_ids: [3, 1, 4, 1, 5, 9, 2, 6], max_new: 3, stops: [] };
        const want = await (await open(t, "q4", { device: "cpu", capacity: 64 })).run(request);
        const e = await fresh(t);
        const shards = [...q4Files.keys()].filter((p) => p.startsWith("variants/q4/") && p.endsWith(".bin"));
        const seen = [];
        const files = await e.load(shards, (loaded, total) => seen.push([loaded, total]));
        const size = shards.reduce((n, p) => n + q4Files.get(p).length, 0);
        if (JSON.stringify(seen[seen.length - 1]) !== JSON.stringify([size, size])) fail(`load progress ended at ${JSON.stringify(seen[seen.length - 1])}, want ${size} of ${size}`);
        await e.open({ variant: "q4", capacity: 64, device: "cpu", files });
        const got = await e.run(request);
        if (!samePieces(got.pieces, want.pieces)) fail("the rows from guest memory differ from the rows read from the files");
        for (const p of Object.values(files)) e.bytes(p, 4096).fill(0);
        if (samePieces((await e.run(request)).pieces, want.pieces)) fail("zeroing the blocks after the open changed no row: the weights are not the blocks");
        wantErr(await catchErr(async () => {
          const g = await fresh(t);
          await g.open({ variant: "q4", capacity: 64, device: "gpu", files: await g.load(shards) });
        }), "only the CPU path");
      }],
      ["cpu: an unknown device is refused by name", async (t) => {
        const e = await fresh(t);
        wantErr(await catchErr(() => e.callIn("ls_open", `{"model":"/model","capacity":64,"device":"tpu"}`)), `device "tpu"`);
        if (Object.keys(e.gpu.counts).length !== 0) fail(`a refused device called gpu imports: ${JSON.stringify(e.gpu.counts)}`);
      }],
    ];
    for (const [name, f] of cases) await runCase(name, f);

    // Through the worker: LogitscopeBridge, Cache Storage and the
    // split-step loop as the UI uses them. The Go test runs each of
    // window.identical.runs' requests through wazero and compares.
    const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 500);
    const windows = [45, 33].map((n, i) => Array.from({ length: n }, (_, j) => (j * 53 + 7 * i + 3) % 500));
    const greedy = { mode: "greedy", prompt_ids: prompt, max_new: 8, stops: [] }; // one row per region
    const panel = { mode: "panel", windows }; // regions of many rows, at offsets, across chunks
    window.identical.runs = [];
    const bridge = new LogitscopeBridge();
    const progress = [];
    bridge.onprogress = (p) => progress.push(p);
    const keep = (name, device, request, out) => window.identical.runs.push({
      name, device, request, output: out.result.output, targets: out.result.targets, stopped: out.result.stopped,
      vocab: out.vocab, width: out.width, rows: Array.from(out.rows), firstRowMs: out.firstRowMs, ms: out.ms });

    await runCase("bridge: probe", async (t) => {
      const p = await bridge.probe();
      if (!p.webgpu) fail(`probe: ${JSON.stringify(p)}`);
      t.log(JSON.stringify(p));
    });
    await runCase("bridge: open fills Cache Storage; a second open reads only the cache", async (t) => {
      await caches.delete(CACHE_NAME);
      progress.length = 0;
      const first = await bridge.open({ model: MODEL, variant: "q4", capacity: 64, device: "gpu" });
      if (first.device !== "webgpu" || first.cachedBytes !== 0 || !(first.bytes > 0)) fail(`first open: ${JSON.stringify(first)}`);
      const phases = new Set(progress.map((p) => p.phase));
      for (const ph of ["fetch", "open"]) if (!phases.has(ph)) fail(`no ${ph} progress: ${JSON.stringify(progress)}`);
      const fetches = progress.filter((p) => p.phase === "fetch");
      const last = fetches[fetches.length - 1];
      if (last.loaded !== first.bytes || last.total !== first.bytes) fail(`last fetch progress ${JSON.stringify(last)}, want ${first.bytes} of ${first.bytes}`);
      const second = await bridge.open({ model: MODEL, variant: "q4", capacity: 64, device: "gpu" });
      if (second.cachedBytes !== second.bytes) fail(`second open: ${JSON.stringify(second)}: want every byte from the cache`);
      t.log(`first ${JSON.stringify(first)}\nsecond ${JSON.stringify(second)}`);
    });
    await runCase("bridge: one call at a time", async (t) => {
      const a = bridge.probe();
      wantErr(await catchErr(() => bridge.probe()), "one call at a time");
      await a;
    });
    await runCase("bridge: a model over the memory budget is refused", async (t) => {
      const err = await catchErr(() => bridge.open({ model: MODEL, variant: "f32", capacity: 64, budget: 1000 }));
      wantErr(err, `model ${MODEL} (f32)`);
      wantErr(err, "memory budget of 1000 bytes");
      wantErr(await catchErr(() => bridge.run(greedy)), "no model open");
    });
    await runCase("bridge: greedy and panel f32 on WebGPU through the worker", async (t) => {
      await bridge.open({ model: MODEL, variant: "f32", capacity: 64, device: "gpu" });
      progress.length = 0;
      const out = await bridge.run(greedy);
      const n = out.rows.length / out.width;
      if (n !== greedy.max_new || out.result.output.length !== greedy.max_new) fail(`${n} rows, output ${JSON.stringify(out.result.output)}`);
      if (!progress.some((p) => p.phase === "rows" && p.loaded === n)) fail(`no rows progress up to ${n}: ${JSON.stringify(progress)}`);
      keep("greedy", "gpu", greedy, out);
      t.log(`greedy: output ${JSON.stringify(out.result.output)}, first row ${out.firstRowMs.toFixed(0)} ms, all ${out.ms.toFixed(0)} ms`);
      const p = await bridge.run(panel);
      const want = windows.reduce((k, w) => k + w.length - 1, 0);
      if (p.rows.length / p.width !== want || p.result.targets.length !== want) fail(`panel: ${p.rows.length / p.width} rows, want ${want}`);
      keep("panel", "gpu", panel, p);
      t.log(`panel: ${want} rows in ${p.ms.toFixed(0)} ms`);
    });
    await runCase("bridge: greedy and panel f32 on the CPU through the worker", async (t) => {
      progress.length = 0;
      const o = await bridge.open({ model: MODEL, variant: "f32", capacity: 64, device: "cpu" });
      if (o.device !== "cpu") fail(`open: ${JSON.stringify(o)}`);
      // The weights went into guest memory first: the checkpoint's safetensors.
      const weights = model.files.filter((f) => !f.path.includes("/") && f.path.endsWith(".safetensors")).reduce((n, f) => n + f.size, 0);
      const loads = progress.filter((p) => p.phase === "load");
      const last = loads[loads.length - 1];
      if (!last || last.loaded !== weights || last.total !== weights) fail(`load progress ${JSON.stringify(loads)}, want it to end at ${weights} of ${weights}`);
      const out = await bridge.run(greedy);
      if (out.rows.length / out.width !== greedy.max_new) fail(`${out.rows.length / out.width} rows`);
      keep("greedy", "cpu", greedy, out);
      t.log(`greedy: output ${JSON.stringify(out.result.output)}, first row ${out.firstRowMs.toFixed(0)} ms, all ${out.ms.toFixed(0)} ms`);
      const p = await bridge.run(panel);
      keep("panel", "cpu", panel, p);
      t.log(`panel: ${p.rows.length / p.width} rows in ${p.ms.toFixed(0)} ms`);
    });
    await runCase("bridge: release drops the model with its worker; a call in flight fails", async (t) => {
      await bridge.open({ model: MODEL, variant: "q4", capacity: 64, device: "cpu" });
      const w = bridge.worker;
      const out = await bridge.run(greedy, { release: true });
      if (out.rows.length / out.width !== greedy.max_new) fail(`${out.rows.length / out.width} rows`);
      if (bridge.worker === w) fail("run with release kept the worker");
      wantErr(await catchErr(() => bridge.run(greedy)), "no model open");
      const opening = bridge.open({ model: MODEL, variant: "q4", capacity: 64, device: "cpu" });
      bridge.release();
      wantErr(await catchErr(() => opening), "the bridge was released");
      await bridge.open({ model: MODEL, variant: "q4", capacity: 64, device: "cpu" });
      if ((await bridge.run(greedy)).result.output.length !== greedy.max_new) fail("no run after a release");
    });
    bridge.terminate();

    const bad = results.filter((r) => !r.ok);
    summary.textContent = `${results.length - bad.length}/${results.length} cases ok` +
      (bad.length ? `; failing: ${bad.map((r) => r.name).join(", ")}` : "") +
      ` (${Math.round(performance.now() - t0)} ms)`;
    document.body.dataset.state = "done";
  } catch (e) {
    console.error("abitest:", e);
    summary.textContent = `the ABI page could not run: ${e && e.message || e}`;
    window.abiError = String(e && e.message || e);
    document.body.dataset.state = "error";
  }
})();
