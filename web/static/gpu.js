// gpu.js: engine.wasm's `gpu` imports on a WebGPU GPUDevice, with the
// semantics of wasm/ABI.md and of the Go host (host/imports.go and
// internal/gpu/native). Plain script: it defines self.LogitscopeGPU.
//
// Handles are small positive integers, never 0, never reused. Imports never
// throw into wasm: a bad handle, a range outside a buffer or outside guest
// memory fails with -1 and a message for last_error. WebGPU reports its own
// validation errors asynchronously: they are collected per call with error
// scopes (and the device's uncapturederror event) and come out at the next
// readback, read() or settle(), which then fails with the first of them.
"use strict";

(function (global) {
  const READ_BUFFER_UNAVAILABLE =
    "read_buffer is not available in the browser host (asynchronous readback); the engine uses the split-step loop";
  const MOUNT = "/model";

  // HostError is a failure that an import reports through last_error.
  class HostError extends Error {}

  // Table maps handles to objects, as internal/gpu/native's table does: handles
  // count up from 1 and are never reused, so a stale handle is named as
  // such. They stay below 2^31 (the ABI returns them as positive i32).
  class Table {
    constructor(kind) {
      this.kind = kind;
      this.items = new Map();
      this.last = 0;
    }
    add(v) {
      if (this.last >= 0x7fffffff) throw new HostError(`out of ${this.kind} handles`);
      this.items.set(++this.last, v);
      return this.last;
    }
    get(h) {
      const v = this.items.get(h);
      if (v !== undefined) return v;
      if (h === 0) throw new HostError(`${this.kind} handle 0 is never valid`);
      if (h > 0 && h <= this.last) throw new HostError(`${this.kind} handle ${h} was destroyed`);
      throw new HostError(`unknown ${this.kind} handle ${h}`);
    }
    remove(h) {
      const v = this.items.get(h);
      this.items.delete(h);
      return v;
    }
  }

  const align4 = (n) => Math.ceil(n / 4) * 4;

  // i64 turns an i64 import parameter (a BigInt) into a Number, refusing
  // what a Number cannot hold exactly.
  function i64(v, what) {
    const b = BigInt(v);
    if (b > BigInt(Number.MAX_SAFE_INTEGER) || b < -BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new HostError(`${what} ${b} is out of range`);
    }
    return Number(b);
  }

  // cleanPath is Go's path.Clean for absolute paths.
  function cleanPath(p) {
    const out = [];
    for (const s of p.split("/")) {
      if (s === "" || s === ".") continue;
      if (s === "..") out.pop();
      else out.push(s);
    }
    return "/" + out.join("/");
  }

  // softwareAdapter says whether a GPUAdapterInfo is a CPU implementation
  // (Chrome's SwiftShader fallback, Mesa's lavapipe): gpu.Info.Software.
  function softwareAdapter(info) {
    if (!info) return false;
    const words = [info.vendor, info.architecture, info.device, info.description].join(" ");
    return !!info.isFallbackAdapter || /swiftshader|llvmpipe|lavapipe/i.test(words);
  }

  function adapterName(info) {
    if (!info) return "WebGPU adapter";
    const parts = [info.vendor, info.architecture, info.device].filter((s) => s);
    if (info.description) return info.description + (parts.length ? ` (${parts.join(", ")})` : "");
    return parts.join(" ") || "WebGPU adapter";
  }

  // requestDevice asks navigator.gpu for an adapter and a device with the
  // adapter's own maxStorageBufferBindingSize and maxBufferSize (the
  // defaults are 128 MiB and 256 MiB) and, where offered, subgroups. It
  // throws an Error that says why when there is no WebGPU.
  async function requestDevice() {
    const gpu = typeof navigator !== "undefined" ? navigator.gpu : undefined;
    if (!gpu) {
      throw new Error("this browser has no WebGPU (navigator.gpu is undefined): use a browser with WebGPU " +
        "(headless Chromium needs --enable-unsafe-webgpu), or open the model with device \"cpu\"");
    }
    const adapter = await gpu.requestAdapter();
    if (!adapter) {
      throw new Error("WebGPU has no adapter here (navigator.gpu.requestAdapter() returned null): " +
        "the GPU may be blocklisted or disabled; open the model with device \"cpu\"");
    }
    const requiredLimits = {};
    for (const k of ["maxStorageBufferBindingSize", "maxBufferSize", "maxStorageBuffersPerShaderStage"]) {
      if (adapter.limits[k] !== undefined) requiredLimits[k] = adapter.limits[k];
    }
    const requiredFeatures = ["subgroups"].filter((f) => adapter.features.has(f));
    let device;
    try {
      device = await adapter.requestDevice({ label: "logitscope", requiredLimits, requiredFeatures });
    } catch (e) {
      throw new Error(`WebGPU adapter ${adapterName(adapter.info)}: requestDevice failed: ${e.message}`);
    }
    return { adapter, device, info: adapter.info, name: adapterName(adapter.info) };
  }

  // probe says whether WebGPU is usable, without keeping a device.
  async function probe() {
    try {
      const gpu = typeof navigator !== "undefined" ? navigator.gpu : undefined;
      if (!gpu) return { webgpu: false, adapter: "", reason: "navigator.gpu is undefined (no WebGPU in this browser or context)" };
      const adapter = await gpu.requestAdapter();
      if (!adapter) return { webgpu: false, adapter: "", reason: "navigator.gpu.requestAdapter() returned null (no usable adapter)" };
      return { webgpu: true, adapter: adapterName(adapter.info), reason: "" };
    } catch (e) {
      return { webgpu: false, adapter: "", reason: `requestAdapter failed: ${e.message}` };
    }
  }

  // GPUHost serves one engine instance.
  //   new GPUHost({device, adapterName, fs, jspi})
  //     device: a GPUDevice, or null for an instance opened with device "cpu"
  //             (then every GPU call fails with a message saying so);
  //     fs:     the instance's LogitscopeWASI.MemFS (upload_file reads it);
  //     jspi:   serve read_buffer as a JSPI Suspending import (tests only:
  //             the caller must enter through WebAssembly.promising).
  //   imports() -> {gpu: {...}}, then setMemory(memory).
  class GPUHost {
    constructor({ device = null, adapterName: name = "", fs = null, jspi = false } = {}) {
      this.device = device;
      this.adapterName = name;
      this.fs = fs;
      this.jspi = jspi;
      this.memory = null;
      this.lastError = "";
      this.counts = {};
      this.badHandle = false; // test hook: corrupt bind group entries' buffer handles
      this.buffers = new Table("buffer");
      this.modules = new Table("shader module");
      this.pipelines = new Table("pipeline");
      this.groups = new Table("bind group");
      this.encoder = null;
      this.pass = null;
      this.doomed = [];
      this.staging = null;
      this.pending = new Set();
      this.firstError = null;
      this.errorCount = 0;
      this.lost = null;
      this.disposed = false;
      this.enc = new TextEncoder();
      if (device) {
        this.onUncaptured = (ev) => this.noteError(`WebGPU: ${ev.error && ev.error.message || ev.error}`);
        device.addEventListener("uncapturederror", this.onUncaptured);
        device.lost.then((info) => {
          this.lost = `the WebGPU device was lost (${info.reason || "unknown"}): ${info.message}`;
        });
      }
    }

    setMemory(memory) { this.memory = memory; }

    noteError(msg) {
      this.errorCount++;
      if (this.firstError === null) this.firstError = msg;
      console.error(`gpu.js: ${msg}`);
    }

    // bytes views guest memory [p, p+n), or throws a HostError.
    bytes(p, n) {
      const buf = this.memory.buffer;
      if (p < 0 || n < 0 || p + n > buf.byteLength) {
        throw new HostError(`[0x${p.toString(16)}, +${n}) is outside guest memory`);
      }
      return new Uint8Array(buf, p, n);
    }
    str(p, n) { return n === 0 ? "" : new TextDecoder().decode(this.bytes(p, n)); }
    put(p, cap, data) {
      if (cap >= data.length) {
        try { this.bytes(p, data.length).set(data); } catch (e) { return 0; }
      }
      return data.length;
    }

    dev() {
      if (this.disposed) throw new HostError("this engine instance was discarded");
      if (!this.device) throw new HostError("no WebGPU device: this engine instance was opened with device \"cpu\"");
      if (this.lost) throw new HostError(this.lost);
      return this.device;
    }

    // scoped runs f inside validation and out-of-memory error scopes; what
    // they catch is noted, asynchronously, under the import's name.
    scoped(what, f) {
      const d = this.dev();
      d.pushErrorScope("out-of-memory");
      d.pushErrorScope("validation");
      try {
        return f(d);
      } finally {
        const p = Promise.all([d.popErrorScope(), d.popErrorScope()]).then(
          (errs) => errs.forEach((e) => e && this.noteError(`${what}: ${e.message}`)),
          (e) => this.noteError(`${what}: popErrorScope: ${e.message}`));
        this.pending.add(p);
        p.finally(() => this.pending.delete(p));
      }
    }

    buffer(h) { this.dev(); return this.buffers.get(h); }

    checkRange(what, b, off, n) {
      if (off < 0 || n < 0 || off > b.size || n > b.size - off) {
        throw new HostError(`${what} buffer "${b.label}": range [${off}, ${off + n}) is outside its ${b.size} bytes`);
      }
    }

    endPass() {
      if (this.pass) {
        this.pass.end();
        this.pass = null;
      }
    }
    commandEncoder() {
      this.endPass();
      if (!this.encoder) this.encoder = this.dev().createCommandEncoder();
      return this.encoder;
    }

    writeBuffer(h, offset, data) {
      const b = this.buffer(h);
      this.checkRange("write_buffer:", b, offset, data.length);
      if (offset % 4 !== 0 || data.length % 4 !== 0) {
        throw new HostError(`write_buffer: buffer "${b.label}": offset ${offset} and length ${data.length} must be multiples of 4`);
      }
      if (data.length === 0) return;
      this.scoped(`write_buffer "${b.label}"`, (d) => d.queue.writeBuffer(b.buf, offset, data));
    }

    submit() {
      this.dev();
      this.endPass();
      const enc = this.encoder;
      this.encoder = null;
      if (enc) this.scoped("submit", (d) => d.queue.submit([enc.finish()]));
      for (const b of this.doomed) b.destroy();
      this.doomed = [];
    }

    uploadFile(h, offset, guest, fileOffset, length) {
      const clean = cleanPath(guest);
      if (!guest.startsWith("/") || !clean.startsWith(MOUNT + "/")) {
        throw new HostError(`upload_file: ${JSON.stringify(guest)} is not a file under ${MOUNT}`);
      }
      if (length < 0 || fileOffset < 0) throw new HostError(`upload_file: ${guest}: offset ${fileOffset}, length ${length}`);
      const file = this.fs && this.fs.file(clean.slice(MOUNT.length + 1));
      if (!file) throw new HostError(`upload_file: open ${clean}: no such file`);
      if (fileOffset + length > file.length) {
        throw new HostError(`upload_file: ${guest}: reading ${length} bytes at ${fileOffset}: the file has ${file.length} bytes (EOF)`);
      }
      let data = file.subarray(fileOffset, fileOffset + length);
      if (length % 4 !== 0) {
        const padded = new Uint8Array(align4(length));
        padded.set(data);
        data = padded;
      }
      this.writeBuffer(h, offset, data);
    }

    // read copies [offset, offset+size) of buffer h out of the GPU:
    // everything recorded so far is submitted with a copy into a MAP_READ
    // staging buffer (kept and reused, grown by doubling), which is mapped.
    // The bytes go into dest (a Uint8Array of size bytes) when given. Then
    // the WebGPU errors of the calls so far are awaited: the first one
    // fails the read.
    async read(h, offset, size, dest) {
      const b = this.buffer(h);
      this.checkRange("read:", b, offset, size);
      const out = dest || new Uint8Array(size);
      if (size === 0) {
        this.submit();
        await this.settle();
        return out;
      }
      const start = offset - (offset % 4);
      const n = align4(offset + size) - start;
      const staging = this.stagingFor(n);
      this.commandEncoder().copyBufferToBuffer(b.buf, start, staging, 0, n);
      this.submit();
      try {
        await staging.mapAsync(GPUMapMode.READ, 0, n);
      } catch (e) {
        await this.settle();
        throw new Error(`reading buffer "${b.label}": mapAsync: ${e.message}`);
      }
      out.set(new Uint8Array(staging.getMappedRange(0, n), offset - start, size));
      staging.unmap();
      await this.settle();
      return out;
    }

    stagingFor(n) {
      if (this.staging && this.staging.size >= n) return this.staging;
      const max = this.dev().limits.maxBufferSize;
      let size = this.staging ? 2 * this.staging.size : 1 << 20;
      while (size < n) size *= 2;
      size = Math.min(size, max);
      if (this.staging) this.staging.destroy();
      this.staging = this.scoped("readback staging buffer", (d) =>
        d.createBuffer({ label: "readback staging", size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }));
      return this.staging;
    }

    // settle waits for the error scopes of every call so far and throws
    // the first WebGPU error, if any.
    async settle() {
      while (this.pending.size > 0) await Promise.all([...this.pending]);
      if (this.lost) throw new Error(this.lost);
      if (this.firstError !== null) {
        const more = this.errorCount > 1 ? ` (and ${this.errorCount - 1} more WebGPU errors)` : "";
        throw new Error(`WebGPU error: ${this.firstError}${more}`);
      }
    }

    // dispose destroys every buffer of the instance.
    dispose() {
      if (this.disposed) return;
      this.pass = null;
      this.encoder = null;
      for (const b of this.buffers.items.values()) b.buf.destroy();
      for (const b of this.doomed) b.destroy();
      if (this.staging) this.staging.destroy();
      this.buffers.items.clear();
      this.doomed = [];
      this.staging = null;
      if (this.device) this.device.removeEventListener("uncapturederror", this.onUncaptured);
      this.disposed = true;
    }

    info() {
      const l = this.device ? this.device.limits : {};
      const subgroups = !!(this.device && this.device.features.has("subgroups"));
      return {
        Adapter: this.device ? this.adapterName : "none (device cpu)",
        Backend: this.device ? "webgpu" : "none",
        Limits: {
          MaxStorageBufferBindingSize: l.maxStorageBufferBindingSize || 0,
          MaxBufferSize: l.maxBufferSize || 0,
          MaxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension || 0,
          MaxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup || 0,
          MaxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX || 0,
          MaxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage || 0,
          MinStorageBufferOffsetAlignment: l.minStorageBufferOffsetAlignment || 0,
          MinUniformBufferOffsetAlignment: l.minUniformBufferOffsetAlignment || 0,
        },
        Subgroups: subgroups,
        // Chromium reports the range of sizes; the engine's subgroup
        // kernels need the smallest to hold a matmul row's lanes.
        SubgroupMinSize: subgroups ? (this.device.adapterInfo && this.device.adapterInfo.subgroupMinSize) || 0 : 0,
        Software: softwareAdapter(this.device && this.device.adapterInfo),
      };
    }

    imports() {
      const h = this;
      const count = (name) => { h.counts[name] = (h.counts[name] || 0) + 1; };
      // i32 parameters arrive signed; every one here is unsigned (handles,
      // pointers, lengths, counts), so they are read as u32. i64 ones stay
      // BigInt. status: 0 or -1; handle: > 0 or -1; void: errors dropped.
      const u32 = (a) => a.map((x) => (typeof x === "number" ? x >>> 0 : x));
      const status = (name, f) => (...a) => {
        count(name);
        try { f(...u32(a)); return 0; } catch (e) { return h.fail(name, e); }
      };
      const handle = (name, f) => (...a) => {
        count(name);
        try { return f(...u32(a)); } catch (e) { return h.fail(name, e); }
      };
      const voidFn = (name, f) => (...a) => {
        count(name);
        try { f(...u32(a)); } catch (e) { h.fail(name, e); }
      };
      const lenFn = (name, f) => (p, cap) => {
        count(name);
        try { return h.put(p >>> 0, cap >>> 0, h.enc.encode(f())); } catch (e) { h.fail(name, e); return 0; }
      };
      const gpu = {
        info: lenFn("info", () => JSON.stringify(h.info())),
        last_error: lenFn("last_error", () => h.lastError),
        create_buffer: handle("create_buffer", (lp, ll, size64) => {
          const label = h.str(lp, ll);
          const size = i64(size64, "size");
          const d = h.dev();
          if (size <= 0) throw new HostError(`buffer "${label}": size ${size} must be positive`);
          const rounded = align4(size);
          if (rounded > d.limits.maxBufferSize) {
            throw new HostError(`buffer "${label}": ${size} bytes exceeds the device's maxBufferSize ${d.limits.maxBufferSize}: split the tensor`);
          }
          const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
          const buf = h.scoped(`create_buffer "${label}"`, (dv) => dv.createBuffer({ label, size: rounded, usage }));
          return h.buffers.add({ label, buf, size: rounded });
        }),
        write_buffer: status("write_buffer", (b, off64, p, n) => {
          const offset = i64(off64, "offset");
          h.writeBuffer(b, offset, h.bytes(p, n));
        }),
        destroy_buffer: voidFn("destroy_buffer", (b) => {
          const buf = h.buffers.remove(b);
          if (!buf || h.disposed) return;
          if (h.encoder) h.doomed.push(buf.buf); // recorded work may use it
          else buf.buf.destroy();
        }),
        create_shader_module: handle("create_shader_module", (lp, ll, wp, wl) => {
          const label = h.str(lp, ll);
          const code = h.str(wp, wl);
          const module = h.scoped(`create_shader_module "${label}"`, (d) => d.createShaderModule({ label, code }));
          return h.modules.add({ label, module });
        }),
        create_compute_pipeline: handle("create_compute_pipeline", (lp, ll, m, ep, el) => {
          const label = h.str(lp, ll);
          const entryPoint = h.str(ep, el);
          const mod = h.modules.get(m);
          const pipe = h.scoped(`create_compute_pipeline "${label}"`, (d) =>
            d.createComputePipeline({ label, layout: "auto", compute: { module: mod.module, entryPoint } }));
          return h.pipelines.add({ label, pipe, layouts: new Map() });
        }),
        create_bind_group: handle("create_bind_group", (ph, group, p, n) => {
          const raw = h.bytes(p, n * 24);
          const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
          const pipe = h.pipelines.get(ph);
          h.dev();
          const entries = [];
          for (let i = 0; i < n; i++) {
            const o = 24 * i;
            const binding = dv.getUint32(o, true);
            let bh = dv.getUint32(o + 4, true);
            if (h.badHandle && i === 0) bh += 1 << 20;
            const offset = i64(dv.getBigInt64(o + 8, true), "offset");
            let size = i64(dv.getBigInt64(o + 16, true), "size");
            let b;
            try {
              b = h.buffers.get(bh);
            } catch (e) {
              throw new HostError(`pipeline "${pipe.label}": @group(${group}) @binding(${binding}): ${e.message}`);
            }
            if (size === 0) size = b.size - offset;
            if (offset < 0 || size <= 0 || offset + size > b.size) {
              throw new HostError(`pipeline "${pipe.label}": @binding(${binding}) on buffer "${b.label}": range offset ${offset} size ${size} is outside its ${b.size} bytes`);
            }
            entries.push({ binding, resource: { buffer: b.buf, offset, size } });
          }
          const bg = h.scoped(`create_bind_group "${pipe.label}" @group(${group})`, (d) => {
            let layout = pipe.layouts.get(group);
            if (!layout) {
              layout = pipe.pipe.getBindGroupLayout(group);
              pipe.layouts.set(group, layout);
            }
            return d.createBindGroup({ label: `${pipe.label} group ${group}`, layout, entries });
          });
          return h.groups.add({ bg, pipe, group });
        }),
        destroy_bind_group: voidFn("destroy_bind_group", (g) => { h.groups.remove(g); }),
        dispatch: status("dispatch", (ph, p, n, x, y, z) => {
          const raw = h.bytes(p, n * 4);
          const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
          const pipe = h.pipelines.get(ph);
          const d = h.dev();
          const bgs = [];
          for (let i = 0; i < n; i++) {
            const gh = dv.getUint32(4 * i, true);
            let g;
            try {
              g = h.groups.get(gh);
            } catch (e) {
              throw new HostError(`dispatch "${pipe.label}": @group(${i}): ${e.message}`);
            }
            if (g.pipe !== pipe || g.group !== i) {
              throw new HostError(`dispatch "${pipe.label}": @group(${i}): bind group ${gh} was made for pipeline "${g.pipe.label}" group ${g.group}`);
            }
            bgs.push(g.bg);
          }
          const max = d.limits.maxComputeWorkgroupsPerDimension;
          if (x > max || y > max || z > max) {
            throw new HostError(`dispatch "${pipe.label}": workgroups (${x}, ${y}, ${z}) exceed the device's ${max} per dimension`);
          }
          if (x === 0 || y === 0 || z === 0) return; // an empty grid is a no-op
          if (!h.pass) h.pass = h.commandEncoder().beginComputePass();
          h.pass.setPipeline(pipe.pipe);
          bgs.forEach((bg, i) => h.pass.setBindGroup(i, bg));
          h.pass.dispatchWorkgroups(x, y, z);
        }),
        copy_buffer: status("copy_buffer", (sh, so64, dh, do64, n64) => {
          const so = i64(so64, "source offset");
          const dof = i64(do64, "destination offset");
          const size = i64(n64, "size");
          let src, dst;
          try { src = h.buffer(sh); } catch (e) { throw new HostError(`copy_buffer source: ${e.message}`); }
          try { dst = h.buffer(dh); } catch (e) { throw new HostError(`copy_buffer destination: ${e.message}`); }
          if (so % 4 !== 0 || dof % 4 !== 0 || size % 4 !== 0) {
            throw new HostError(`copy_buffer "${src.label}" -> "${dst.label}": offsets ${so}, ${dof} and size ${size} must be multiples of 4`);
          }
          h.checkRange("copy_buffer source", src, so, size);
          h.checkRange("copy_buffer destination", dst, dof, size);
          if (src === dst) throw new HostError(`copy_buffer: source and destination are both buffer "${src.label}"`);
          if (size === 0) return;
          h.commandEncoder().copyBufferToBuffer(src.buf, so, dst.buf, dof, size);
        }),
        submit: status("submit", () => h.submit()),
        read_buffer: status("read_buffer", () => { throw new HostError(READ_BUFFER_UNAVAILABLE); }),
        upload_file: status("upload_file", (b, off64, pp, pl, fo64, len64) => {
          const guest = h.str(pp, pl);
          h.uploadFile(b, i64(off64, "offset"), guest, i64(fo64, "file offset"), i64(len64, "length"));
        }),
      };
      if (this.jspi) {
        if (typeof WebAssembly.Suspending !== "function") throw new Error("gpu.js: JSPI (WebAssembly.Suspending) is not available");
        gpu.read_buffer = new WebAssembly.Suspending(async (b, off64, size64, dst) => {
          count("read_buffer");
          b >>>= 0;
          dst >>>= 0;
          try {
            const offset = i64(off64, "offset");
            const size = i64(size64, "size");
            h.bytes(dst, size);
            const out = await h.read(b, offset, size);
            h.bytes(dst, size).set(out); // memory may have been replaced while waiting
            return 0;
          } catch (e) {
            return h.fail("read_buffer", e);
          }
        });
      }
      return { gpu };
    }

    // fail keeps the message for last_error, prefixed with the import's
    // name unless it starts with it already, and returns -1.
    fail(name, e) {
      const msg = e && e.message || String(e);
      this.lastError = msg.startsWith(name) ? msg : `${name}: ${msg}`;
      if (!(e instanceof HostError)) console.error(`gpu.js: ${name}:`, e);
      return -1;
    }
  }

  global.LogitscopeGPU = { GPUHost, HostError, requestDevice, probe, adapterName, READ_BUFFER_UNAVAILABLE, MOUNT };
})(typeof self !== "undefined" ? self : globalThis);
