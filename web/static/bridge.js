// bridge.js: the page's side of the engine (web/BRIDGE.md). Plain script:
// it defines window.LogitscopeBridge, which starts worker.js and turns its
// messages into promises.
//
//   const b = new LogitscopeBridge();
//   b.onprogress = (p) => {};            // {phase, message, loaded, total}
//   await b.probe();                     // {webgpu, adapter, reason}
//   await b.open({model, variant, capacity, device});
//   await b.run(request);                // {result, vocab, width, rows, firstRowMs, ms}
//   b.terminate();
"use strict";

(function (global) {
  class LogitscopeBridge {
    constructor(workerURL = "/static/worker.js") {
      this.onprogress = null;
      this.worker = new Worker(workerURL);
      this.nextId = 1;
      this.current = null; // {id, op, resolve, reject}
      this.dead = "";
      this.worker.onmessage = (ev) => this.receive(ev.data);
      this.worker.onerror = (ev) => {
        ev.preventDefault();
        const msg = `the engine worker failed: ${ev.message || "script error"}` +
          (ev.filename ? ` (${ev.filename}:${ev.lineno})` : "");
        this.fail(msg);
      };
      this.worker.onmessageerror = () => this.fail("the engine worker sent a message that could not be read");
    }

    receive(m) {
      if (!m) return;
      if (m.log) {
        const f = m.log.level === "error" ? console.error : m.log.level === "warn" ? console.warn : console.log;
        f.call(console, `[worker] ${m.log.text}`);
        return;
      }
      const c = this.current;
      if (!c || m.id !== c.id) return;
      if (m.progress) {
        if (typeof this.onprogress === "function") {
          try { this.onprogress(m.progress); } catch (e) { console.error("onprogress:", e); }
        }
        return;
      }
      this.current = null;
      if (m.ok) c.resolve(m.value);
      else c.reject(new Error(m.error));
    }

    fail(msg) {
      const c = this.current;
      this.current = null;
      if (c) c.reject(new Error(msg));
      else console.error(msg);
    }

    call(op, args) {
      if (this.dead) return Promise.reject(new Error(this.dead));
      if (this.current) {
        return Promise.reject(new Error(`${op}: the bridge is busy with ${this.current.op} (one call at a time: await it first)`));
      }
      return new Promise((resolve, reject) => {
        const id = this.nextId++;
        this.current = { id, op, resolve, reject };
        this.worker.postMessage({ id, op, args });
      });
    }

    // probe -> {webgpu: bool, adapter: string, reason: string}
    probe() { return this.call("probe", {}); }

    // open {model, variant = "f32", capacity = 64, device = "auto"|"gpu"|"cpu", budget, file, folder}
    //   model: a model the server lists, or "local:NAME/" with folder, the Files of a
    //   model folder from this computer ([{path, file}]; handed to the worker, never uploaded)
    //   variant: f32, q8, q6, q4, a GGUF file the model has, or "local:NAME.gguf"
    //   with file, the File to read it from (handed to the worker, never uploaded)
    //   -> {device: "webgpu"|"cpu", adapter, bytes, cachedBytes, vocab, ms}
    open(args) { return this.call("open", args); }

    // run <wasm/abi.Request> -> {result, vocab, width, rows: Float32Array, firstRowMs, ms}
    run(request) {
      return this.call("run", request).then((v) => {
        if (!(v.rows instanceof Float32Array)) v.rows = new Float32Array(v.rows || []);
        return v;
      });
    }

    // terminate stops the worker; a call in flight rejects, later calls too.
    terminate() {
      this.worker.terminate();
      this.dead = "the bridge was terminated";
      if (this.current) this.fail(this.dead);
    }
  }

  global.LogitscopeBridge = LogitscopeBridge;
})(typeof window !== "undefined" ? window : self);
