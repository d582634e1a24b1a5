// bridge.js: the page's side of the engine (web/BRIDGE.md). Plain script:
// it defines window.LogitscopeBridge, which starts worker.js and turns its
// messages into promises.
//
//   const b = new LogitscopeBridge();
//   b.onprogress = (p) => {};            // {phase, message, loaded, total}
//   await b.probe();                     // {webgpu, adapter, reason}
//   await b.open({model, variant, capacity, device});
//   await b.run(request);                // {result, vocab, width, rows, firstRowMs, ms}
//   await b.run(request, {release: true}); // the same, the model gone before it resolves
//   b.release();                         // the model's memory goes (the next open may follow)
//   b.terminate();
"use strict";

(function (global) {
  class LogitscopeBridge {
    constructor(workerURL = "/static/worker.js") {
      this.onprogress = null;
      this.workerURL = workerURL;
      this.nextId = 1;
      this.current = null; // {id, op, resolve, reject}
      this.dead = "";
      this.opened = false; // the worker has opened a model
      this.start();
    }

    // start starts a fresh worker.
    start() {
      const w = new Worker(this.workerURL);
      w.onmessage = (ev) => this.receive(ev.data);
      w.onerror = (ev) => {
        ev.preventDefault();
        const msg = `the engine worker failed: ${ev.message || "script error"}` +
          (ev.filename ? ` (${ev.filename}:${ev.lineno})` : "");
        this.fail(msg);
      };
      w.onmessageerror = () => this.fail("the engine worker sent a message that could not be read");
      this.worker = w;
      this.opened = false;
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
    //
    // Each open after the first runs in a fresh worker: the model before
    // goes with its worker, all at once (its guest memory and what its
    // reads left in the worker's heap), not when a collection finds it.
    open(args) {
      if (this.opened && !this.current && !this.dead) {
        this.worker.terminate();
        this.start();
      }
      const p = this.call("open", args);
      this.opened = true;
      return p;
    }

    // release drops the open model with its worker, as the next open would,
    // for a page that has read what it needs; a fresh worker takes later
    // calls. It fails a call in flight.
    release() {
      if (this.dead || !this.opened) return;
      this.worker.terminate();
      if (this.current) this.fail("the bridge was released");
      this.start();
    }

    // run <wasm/abi.Request> -> {result, vocab, width, rows: Float32Array, firstRowMs, ms}
    // With release, the model goes (release) before the promise resolves:
    // the last run of a model, whose rows the page then copies without
    // holding the model beside them.
    run(request, { release = false } = {}) {
      return this.call("run", request).then((v) => {
        if (release) this.release();
        v.rows = join(v.rows || []);
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

  // join is the worker's rows, a region's ArrayBuffer at a time, as one
  // Float32Array.
  function join(buffers) {
    const out = new Uint8Array(buffers.reduce((n, b) => n + b.byteLength, 0));
    let at = 0;
    for (const b of buffers) {
      out.set(new Uint8Array(b), at);
      at += b.byteLength;
    }
    return new Float32Array(out.buffer);
  }

  global.LogitscopeBridge = LogitscopeBridge;
})(typeof window !== "undefined" ? window : self);
