// wasi.js: WASI preview1 for engine.wasm (a Go wasip1 reactor) in a browser
// or a Worker. Plain script: it defines self.LogitscopeWASI.
//
// It serves the calls the Go runtime makes (args, environ, clocks, random,
// poll_oneoff for sleeps, stdio) and a read-only in-memory file system, the
// model's files, mounted at /model as the preopen fd 3. Every function
// returns a WASI errno; none throws into wasm except proc_exit, which throws
// ProcExit so that the host discards the instance (wasm/ABI.md).
"use strict";

(function (global) {
  // Errno values from the WASI preview1 spec (witx: typenames.witx).
  const E = {
    SUCCESS: 0, ACCES: 2, AGAIN: 6, BADF: 8, EXIST: 20, FAULT: 21, INVAL: 28, IO: 29,
    ISDIR: 31, NAMETOOLONG: 37, NOENT: 44, NOSYS: 52, NOTDIR: 54, NOTSUP: 58,
    OVERFLOW: 61, PERM: 63, ROFS: 69, SPIPE: 70, NOTCAPABLE: 76,
  };
  const FILETYPE = { UNKNOWN: 0, CHARACTER_DEVICE: 2, DIRECTORY: 3, REGULAR_FILE: 4 };
  const OFLAG = { CREAT: 1, DIRECTORY: 2, EXCL: 4, TRUNC: 8 };
  const FDFLAG = { APPEND: 1, DSYNC: 2, NONBLOCK: 4, RSYNC: 8, SYNC: 16 };
  const R = (bit) => 1n << BigInt(bit);
  const RIGHT = {
    FD_DATASYNC: R(0), FD_READ: R(1), FD_SEEK: R(2), FDSTAT_SET_FLAGS: R(3), FD_SYNC: R(4),
    FD_TELL: R(5), FD_WRITE: R(6), FD_ADVISE: R(7), FD_ALLOCATE: R(8),
    PATH_CREATE_DIRECTORY: R(9), PATH_CREATE_FILE: R(10), PATH_OPEN: R(13), FD_READDIR: R(14),
    PATH_FILESTAT_GET: R(18), PATH_FILESTAT_SET_SIZE: R(19), FD_FILESTAT_GET: R(21),
    FD_FILESTAT_SET_SIZE: R(22), FD_FILESTAT_SET_TIMES: R(23), POLL_FD_READWRITE: R(27),
  };
  // Rights that say "open for writing": refused by path_open. Only these:
  // Go's O_RDONLY asks for FD_SYNC, FD_FILESTAT_SET_SIZE and others too.
  const WRITE_RIGHTS = RIGHT.FD_WRITE | RIGHT.FD_ALLOCATE;
  const FILE_RIGHTS = RIGHT.FD_READ | RIGHT.FD_SEEK | RIGHT.FDSTAT_SET_FLAGS | RIGHT.FD_TELL |
    RIGHT.FD_ADVISE | RIGHT.FD_FILESTAT_GET | RIGHT.POLL_FD_READWRITE;
  const DIR_RIGHTS = RIGHT.PATH_OPEN | RIGHT.FD_READDIR | RIGHT.PATH_FILESTAT_GET |
    RIGHT.FD_FILESTAT_GET | RIGHT.FDSTAT_SET_FLAGS;
  const DIRENT_SIZE = 24; // d_next u64, d_ino u64, d_namlen u32, d_type u8, padding
  const FILESTAT_SIZE = 64;

  // ProcExit is what proc_exit throws: the Go runtime exited (an unrecovered
  // panic exits with 2). The instance cannot be used any more.
  class ProcExit extends Error {
    constructor(code) {
      super(`engine.wasm exited with proc_exit(${code})`);
      this.name = "ProcExit";
      this.code = code;
    }
  }

  // READ_AHEAD is how much a BlobFile reads at once for a short read.
  const READ_AHEAD = 4 << 20;
  // STREAM_BUFFER is the buffer BlobFile.stream reads into.
  const STREAM_BUFFER = 4 << 20;

  // BlobFile is a file the user picked (a File or any Blob) as MemFS data:
  // it reads what is asked for, when it is asked for, so a multi-gigabyte
  // GGUF or safetensors shard from the user's disk is never held whole (nor
  // sent anywhere). It has what MemFS and gpu.js use of a Uint8Array:
  // length and subarray. WASI calls are synchronous, so it reads with
  // FileReaderSync, which only workers have.
  class BlobFile {
    // source says where the blob lies, for a failed read's message: a
    // file the user chose (default), or the browser's cached copy of a
    // served file.
    constructor(blob, name, source = "") {
      if (typeof FileReaderSync === "undefined") throw new Error(`${name}: reading a local file needs a Worker (FileReaderSync)`);
      this.blob = blob;
      this.name = name;
      this.source = source;
      this.length = blob.size;
      this.reader = new FileReaderSync();
      this.ahead = null; // the window read ahead: {start, bytes}
      this.next = -1; // where the last read ended
    }

    // subarray reads bytes [start, end) (a copy, unlike a Uint8Array's).
    // A short read that continues the last one is served from a window of
    // READ_AHEAD bytes read at once: Go hashes a file 32 KiB per fd_read
    // (io.Copy), and a FileReaderSync call per 32 KiB read 256 MiB in 9.0 s
    // in headless Chromium on the 2-core test machine, the window in 1.1 s.
    // Reads that jump (tensor uploads in the engine's order) read just what
    // they ask for.
    subarray(start = 0, end = this.length) {
      start = Math.max(0, Math.min(start, this.length));
      end = Math.max(start, Math.min(end, this.length));
      const sequential = start === this.next;
      this.next = end;
      const a = this.ahead;
      if (a && start >= a.start && end <= a.start + a.bytes.length) return a.bytes.slice(start - a.start, end - a.start);
      if (!sequential || end - start >= READ_AHEAD) return this.read(start, end);
      this.ahead = { start, bytes: this.read(start, Math.min(this.length, start + READ_AHEAD)) };
      return this.ahead.bytes.slice(0, end - start);
    }

    read(start, end) {
      try {
        return new Uint8Array(this.reader.readAsArrayBuffer(this.blob.slice(start, end)));
      } catch (e) {
        throw this.failed(start, end, e);
      }
    }

    // failed is the error of a read of bytes [start, end) that the browser
    // refused: a file that changed or moved since it was chosen.
    failed(start, end, e) {
      if (this.source) return new Error(`reading ${this.name} (bytes ${start}–${end}) from ${this.source}: ${e.name}: ${e.message}; reload the page to fetch it again`);
      return new Error(`reading ${this.name} (bytes ${start}–${end}) from disk: ${e.name}: ${e.message}; choose the file again if it changed`);
    }

    // stream reads the whole file in order, handing each piece to
    // put(bytes, at), which must copy it before the next: where the
    // browser reads a Blob's stream into a given buffer (BYOB), every
    // piece lands in one reused buffer, so a file read into guest memory
    // leaves no garbage (FileReaderSync makes a buffer per read: 278 MB of
    // shards read that way piled up 200 MB in a worker before a collection).
    async stream(put) {
      const s = this.blob.stream();
      let byob = null;
      try {
        byob = s.getReader({ mode: "byob" });
      } catch (e) {
        // not a byte stream: a buffer per piece
      }
      const reader = byob || s.getReader();
      let at = 0;
      let buf = byob ? new ArrayBuffer(STREAM_BUFFER) : null;
      try {
        for (;;) {
          const { done, value } = await (byob ? reader.read(new Uint8Array(buf)) : reader.read());
          if (done) break;
          put(value, at);
          at += value.length;
          if (byob) buf = value.buffer;
        }
      } catch (e) {
        throw this.failed(at, this.length, e);
      }
      if (at !== this.length) throw this.failed(at, this.length, new Error(`the file ended after ${at} of its ${this.length} bytes`));
    }
  }

  // GuestFile is a file the host has put in guest memory (ls_open's
  // "files", wasm/ABI.md) as MemFS data: subarray is a view of the guest's
  // bytes, made at each call, since a view dies when the memory grows.
  // Reading it costs no copy but the one into the reader's buffer.
  class GuestFile {
    constructor(memory, ptr, length) {
      this.memory = memory;
      this.ptr = ptr;
      this.length = length;
    }

    subarray(start = 0, end = this.length) {
      start = Math.max(0, Math.min(start, this.length));
      end = Math.max(start, Math.min(end, this.length));
      return new Uint8Array(this.memory.buffer, this.ptr + start, end - start);
    }
  }

  // MemFS is a read-only tree built from a map of relative paths to bytes;
  // directories are implied by the paths. Inode numbers start at 1 (the
  // root) and are never 0, which readers may take for a deleted entry.
  class MemFS {
    constructor(files) {
      let ino = 1;
      this.root = { type: FILETYPE.DIRECTORY, ino: ino++, children: new Map() };
      this.root.parent = this.root;
      const entries = files instanceof Map ? [...files] : Object.entries(files || {});
      for (const [path, data] of entries) {
        MemFS.check(path, data);
        const parts = path.split("/").filter((p) => p !== "" && p !== ".");
        if (parts.length === 0 || parts.includes("..")) throw new Error(`MemFS: bad path ${JSON.stringify(path)}`);
        let dir = this.root;
        for (const name of parts.slice(0, -1)) {
          let next = dir.children.get(name);
          if (!next) {
            next = { type: FILETYPE.DIRECTORY, ino: ino++, children: new Map(), parent: dir };
            dir.children.set(name, next);
          } else if (next.type !== FILETYPE.DIRECTORY) {
            throw new Error(`MemFS: ${path}: ${name} is a file`);
          }
          dir = next;
        }
        const name = parts[parts.length - 1];
        if (dir.children.has(name)) throw new Error(`MemFS: ${path} given twice`);
        dir.children.set(name, { type: FILETYPE.REGULAR_FILE, ino: ino++, data, parent: dir });
      }
    }

    // lookup resolves a relative path from dir. It returns {node} or
    // {errno}. ".." never leaves the root (NOTCAPABLE, as a preopen should).
    lookup(dir, path) {
      if (path.startsWith("/")) return { errno: E.NOTCAPABLE };
      const trailingSlash = path.endsWith("/");
      let node = dir;
      for (const name of path.split("/")) {
        if (name === "" || name === ".") continue;
        if (node.type !== FILETYPE.DIRECTORY) return { errno: E.NOTDIR };
        if (name === "..") {
          if (node === this.root) return { errno: E.NOTCAPABLE };
          node = node.parent;
          continue;
        }
        const next = node.children.get(name);
        if (!next) return { errno: E.NOENT };
        node = next;
      }
      if (trailingSlash && node.type !== FILETYPE.DIRECTORY) return { errno: E.NOTDIR };
      return { node };
    }

    static check(path, data) {
      if (!(data instanceof Uint8Array) && !(data instanceof BlobFile) && !(data instanceof GuestFile)) {
        throw new TypeError(`MemFS: ${path}: want a Uint8Array, a BlobFile or a GuestFile`);
      }
    }

    // file returns the bytes of the file at a path relative to the root (a
    // Uint8Array, a BlobFile or a GuestFile), or null.
    file(path) {
      const { node } = this.lookup(this.root, path);
      return node && node.type === FILETYPE.REGULAR_FILE ? node.data : null;
    }

    // replace serves the file at path from data (the same bytes, held
    // elsewhere: a GuestFile once the host has read it into guest memory).
    replace(path, data) {
      const { node } = this.lookup(this.root, path);
      if (!node || node.type !== FILETYPE.REGULAR_FILE) throw new Error(`MemFS: no file ${path}`);
      MemFS.check(path, data);
      if (data.length !== node.data.length) throw new Error(`MemFS: ${path}: ${data.length} bytes for a file of ${node.data.length}`);
      node.data = data;
    }
  }

  // Lines is a line buffer for one output stream: whole lines go to emit,
  // and the recent text is kept (at most keep bytes) for error messages.
  class Lines {
    constructor(emit, keep = 64 << 10) {
      this.emit = emit;
      this.keep = keep;
      this.partial = "";
      this.recent = "";
      this.decoder = new TextDecoder("utf-8");
    }
    write(bytes) {
      const text = this.decoder.decode(bytes, { stream: true });
      this.recent += text;
      if (this.recent.length > this.keep) this.recent = this.recent.slice(this.recent.length - this.keep);
      const lines = (this.partial + text).split("\n");
      this.partial = lines.pop();
      for (const l of lines) this.emit(l);
    }
    flush() {
      if (this.partial !== "") this.emit(this.partial);
      this.partial = "";
    }
  }

  // WASI is one instance's WASI state: the fd table and stdio.
  //   new WASI({files, mount = "/model", args = ["engine.wasm"], env = {},
  //             stdout = (line) => console.log(line), stderr = ...})
  //   imports() -> {wasi_snapshot_preview1: {...}}; then setMemory(memory).
  class WASI {
    constructor(opts = {}) {
      this.fs = opts.fs instanceof MemFS ? opts.fs : new MemFS(opts.files || {});
      this.mount = opts.mount || "/model";
      this.args = opts.args || ["engine.wasm"];
      this.env = Object.entries(opts.env || {}).map(([k, v]) => `${k}=${v}`);
      this.stdout = new Lines(opts.stdout || ((l) => console.log(l)));
      this.stderr = new Lines(opts.stderr || ((l) => console.error(l)));
      this.memory = null;
      this.enc = new TextEncoder();
      const stdio = (fd) => ({ kind: "stdio", fd, flags: 0 });
      this.fds = new Map([[0, stdio(0)], [1, stdio(1)], [2, stdio(2)],
        [3, { kind: "dir", node: this.fs.root, preopen: true, flags: 0 }]]);
      this.nextFd = 4;
      this.sleepCell = null;
    }

    setMemory(memory) { this.memory = memory; }

    // output is what the instance wrote to stdout and stderr lately.
    output() {
      this.stdout.flush();
      this.stderr.flush();
      return { stdout: this.stdout.recent, stderr: this.stderr.recent };
    }

    dv() { return new DataView(this.memory.buffer); }
    u8() { return new Uint8Array(this.memory.buffer); }
    // bytes views guest memory; it throws RangeError when out of range,
    // which the wrapper turns into FAULT.
    bytes(p, n) {
      const buf = this.memory.buffer;
      if (p < 0 || n < 0 || p + n > buf.byteLength) throw new RangeError(`[${p}, +${n}) outside guest memory`);
      return new Uint8Array(buf, p, n);
    }
    str(p, n) { return new TextDecoder().decode(this.bytes(p, n)); }

    // iovecs reads n iovec records (buf u32, len u32) at p.
    iovecs(p, n) {
      const dv = this.dv();
      const out = [];
      for (let i = 0; i < n; i++) out.push(this.bytes(dv.getUint32(p + 8 * i, true), dv.getUint32(p + 8 * i + 4, true)));
      return out;
    }

    fd(fd) { return this.fds.get(fd); }

    writeFilestat(p, node, stdio) {
      const dv = this.dv();
      this.bytes(p, FILESTAT_SIZE).fill(0);
      dv.setBigUint64(p + 0, 1n, true); // dev
      dv.setBigUint64(p + 8, BigInt(stdio ? 0 : node.ino), true);
      dv.setUint8(p + 16, stdio ? FILETYPE.CHARACTER_DEVICE : node.type);
      dv.setBigUint64(p + 24, 1n, true); // nlink
      dv.setBigUint64(p + 32, BigInt(!stdio && node.type === FILETYPE.REGULAR_FILE ? node.data.length : 0), true);
    }

    sleep(ms) {
      if (ms <= 0) return;
      // Atomics.wait blocks without burning a core, but only in a Worker
      // with SharedArrayBuffer (cross-origin isolated); else spin.
      if (typeof SharedArrayBuffer === "function" && typeof WorkerGlobalScope !== "undefined") {
        try {
          this.sleepCell = this.sleepCell || new Int32Array(new SharedArrayBuffer(4));
          Atomics.wait(this.sleepCell, 0, 0, ms);
          return;
        } catch (e) { /* fall through to spinning */ }
      }
      const end = performance.now() + ms;
      while (performance.now() < end) { /* spin */ }
    }

    imports() {
      const self = this;
      // i32 parameters arrive signed; every one in WASI preview1 is
      // unsigned (fds, pointers, lengths, flags), so they are read as u32.
      const wrap = (name, f) => function (...args) {
        try {
          return f.apply(self, args.map((a) => (typeof a === "number" ? a >>> 0 : a)));
        } catch (e) {
          if (e instanceof ProcExit) throw e;
          if (e instanceof RangeError) return E.FAULT;
          console.error(`wasi.js: ${name}: ${e && e.stack || e}`);
          return E.IO;
        }
      };
      const fns = {
        args_sizes_get(argcP, sizeP) {
          const dv = this.dv();
          dv.setUint32(argcP, this.args.length, true);
          dv.setUint32(sizeP, this.args.reduce((n, a) => n + this.enc.encode(a).length + 1, 0), true);
          return E.SUCCESS;
        },
        args_get(argvP, bufP) { return this.putStrings(this.args, argvP, bufP); },
        environ_sizes_get(countP, sizeP) {
          const dv = this.dv();
          dv.setUint32(countP, this.env.length, true);
          dv.setUint32(sizeP, this.env.reduce((n, a) => n + this.enc.encode(a).length + 1, 0), true);
          return E.SUCCESS;
        },
        environ_get(envP, bufP) { return this.putStrings(this.env, envP, bufP); },

        clock_res_get(id, resP) {
          if (id > 3) return E.INVAL;
          this.dv().setBigUint64(resP, 1000n, true);
          return E.SUCCESS;
        },
        clock_time_get(id, _precision, timeP) {
          let ns;
          switch (id) {
            case 0: // realtime
              ns = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e3)) * 1000n;
              break;
            case 1: case 2: case 3: // monotonic, process and thread CPU time
              ns = BigInt(Math.round(performance.now() * 1e6));
              break;
            default:
              return E.INVAL;
          }
          this.dv().setBigUint64(timeP, ns, true);
          return E.SUCCESS;
        },
        random_get(p, n) {
          for (let off = 0; off < n; off += 65536) {
            crypto.getRandomValues(this.bytes(p + off, Math.min(65536, n - off)));
          }
          return E.SUCCESS;
        },
        sched_yield() { return E.SUCCESS; },
        proc_exit(code) {
          this.stdout.flush();
          this.stderr.flush();
          throw new ProcExit(code);
        },

        // poll_oneoff: subscriptions are 48 bytes (userdata u64, tag u8,
        // then at 16 clock {id u32, timeout u64 @24, precision u64 @32,
        // flags u16 @40} or fd_readwrite {fd u32}); events are 32 bytes
        // (userdata u64, error u16 @8, type u8 @10, nbytes u64 @16, flags
        // u16 @24). Fd subscriptions are ready at once (nothing here ever
        // blocks); otherwise it sleeps until the earliest clock.
        poll_oneoff(inP, outP, n, neventsP) {
          if (n === 0) return E.INVAL;
          const dv = this.dv();
          this.bytes(inP, 48 * n);
          this.bytes(outP, 32 * n);
          const nowNs = () => BigInt(Math.round(performance.now() * 1e6));
          const subs = [];
          for (let i = 0; i < n; i++) {
            const s = inP + 48 * i;
            const sub = { userdata: dv.getBigUint64(s, true), tag: dv.getUint8(s + 8) };
            if (sub.tag === 0) {
              const id = dv.getUint32(s + 16, true);
              let timeout = dv.getBigUint64(s + 24, true);
              const abs = (dv.getUint16(s + 40, true) & 1) !== 0;
              if (abs) {
                const now = id === 0 ? BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) : nowNs();
                timeout = timeout > now ? timeout - now : 0n;
              }
              sub.ns = timeout;
            } else {
              sub.fd = dv.getUint32(s + 16, true);
            }
            subs.push(sub);
          }
          const fdSubs = subs.filter((s) => s.tag !== 0);
          let fired;
          if (fdSubs.length > 0) {
            fired = fdSubs;
          } else {
            const min = subs.reduce((m, s) => (s.ns < m ? s.ns : m), subs[0].ns);
            this.sleep(Number(min) / 1e6);
            fired = subs.filter((s) => s.ns === min);
          }
          fired.forEach((s, i) => {
            const e = outP + 32 * i;
            this.bytes(e, 32).fill(0);
            dv.setBigUint64(e, s.userdata, true);
            dv.setUint16(e + 8, s.tag !== 0 && !this.fds.has(s.fd) ? E.BADF : E.SUCCESS, true);
            dv.setUint8(e + 10, s.tag);
          });
          dv.setUint32(neventsP, fired.length, true);
          return E.SUCCESS;
        },

        fd_write(fd, iovs, n, nwrittenP) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          if (f.kind !== "stdio" || fd === 0) return E.BADF; // read-only files
          let total = 0;
          for (const b of this.iovecs(iovs, n)) {
            (fd === 1 ? this.stdout : this.stderr).write(b);
            total += b.length;
          }
          this.dv().setUint32(nwrittenP, total, true);
          return E.SUCCESS;
        },
        fd_read(fd, iovs, n, nreadP) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          if (f.kind === "dir") return E.ISDIR;
          if (f.kind === "stdio") {
            if (fd !== 0) return E.BADF;
            this.dv().setUint32(nreadP, 0, true); // stdin is empty
            return E.SUCCESS;
          }
          const got = this.readAt(f.node.data, f.pos, this.iovecs(iovs, n));
          f.pos += got;
          this.dv().setUint32(nreadP, got, true);
          return E.SUCCESS;
        },
        fd_pread(fd, iovs, n, offset, nreadP) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          if (f.kind === "dir") return E.ISDIR;
          if (f.kind !== "file") return E.SPIPE;
          const got = this.readAt(f.node.data, offset, this.iovecs(iovs, n));
          this.dv().setUint32(nreadP, got, true);
          return E.SUCCESS;
        },
        fd_seek(fd, offset, whence, newP) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          if (f.kind === "dir") return E.ISDIR;
          if (f.kind !== "file") return E.SPIPE;
          const base = [0n, BigInt(f.pos), BigInt(f.node.data.length)][whence];
          if (base === undefined) return E.INVAL;
          const pos = base + offset;
          if (pos < 0n) return E.INVAL;
          f.pos = Number(pos);
          this.dv().setBigUint64(newP, pos, true);
          return E.SUCCESS;
        },
        fd_tell(fd, newP) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          if (f.kind !== "file") return E.SPIPE;
          this.dv().setBigUint64(newP, BigInt(f.pos), true);
          return E.SUCCESS;
        },
        fd_close(fd) {
          if (!this.fds.has(fd)) return E.BADF;
          this.fds.delete(fd);
          return E.SUCCESS;
        },
        fd_fdstat_get(fd, p) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          const dv = this.dv();
          this.bytes(p, 24).fill(0);
          let type, rights, inheriting = 0n;
          if (f.kind === "stdio") {
            type = FILETYPE.CHARACTER_DEVICE;
            rights = (fd === 0 ? RIGHT.FD_READ : RIGHT.FD_WRITE) | RIGHT.FDSTAT_SET_FLAGS | RIGHT.POLL_FD_READWRITE | RIGHT.FD_FILESTAT_GET;
          } else if (f.kind === "dir") {
            type = FILETYPE.DIRECTORY;
            rights = DIR_RIGHTS;
            inheriting = DIR_RIGHTS | FILE_RIGHTS;
          } else {
            type = FILETYPE.REGULAR_FILE;
            rights = FILE_RIGHTS;
          }
          dv.setUint8(p, type);
          dv.setUint16(p + 2, f.flags, true);
          dv.setBigUint64(p + 8, rights, true);
          dv.setBigUint64(p + 16, inheriting, true);
          return E.SUCCESS;
        },
        fd_fdstat_set_flags(fd, flags) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          if (f.kind !== "stdio" && (flags & (FDFLAG.APPEND | FDFLAG.DSYNC | FDFLAG.SYNC | FDFLAG.RSYNC))) return E.ROFS;
          f.flags = flags;
          return E.SUCCESS;
        },
        fd_filestat_get(fd, p) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          this.writeFilestat(p, f.node, f.kind === "stdio");
          return E.SUCCESS;
        },
        fd_prestat_get(fd, p) {
          const f = this.fd(fd);
          if (!f || !f.preopen) return E.BADF;
          const dv = this.dv();
          this.bytes(p, 8).fill(0);
          dv.setUint8(p, 0); // preopentype dir
          dv.setUint32(p + 4, this.enc.encode(this.mount).length, true);
          return E.SUCCESS;
        },
        fd_prestat_dir_name(fd, p, n) {
          const f = this.fd(fd);
          if (!f || !f.preopen) return E.BADF;
          const name = this.enc.encode(this.mount);
          if (n < name.length) return E.NAMETOOLONG;
          this.bytes(p, name.length).set(name);
          return E.SUCCESS;
        },

        // fd_readdir lists ".", ".." and the entries in name order. The
        // cookie of an entry is its index; d_next is the next index. Entries
        // go out while they fit; the first that does not is written
        // truncated to fill the buffer, so nwritten == len says "there may
        // be more": Go's ReadDirent drops the partial entry and asks again
        // from the last whole entry's d_next. A cookie past the end gives 0
        // bytes (end of directory).
        fd_readdir(fd, bufP, len, cookie, nwrittenP) {
          const f = this.fd(fd);
          if (!f) return E.BADF;
          if (f.kind !== "dir") return E.NOTDIR;
          const node = f.node;
          const entries = [[".", node], ["..", node.parent]];
          for (const name of [...node.children.keys()].sort()) entries.push([name, node.children.get(name)]);
          const out = this.bytes(bufP, len);
          let w = 0;
          for (let i = Number(cookie); i < entries.length && w < len; i++) {
            const [name, child] = entries[i];
            const nameBytes = this.enc.encode(name);
            const rec = new Uint8Array(DIRENT_SIZE + nameBytes.length);
            const dv = new DataView(rec.buffer);
            dv.setBigUint64(0, BigInt(i + 1), true);
            dv.setBigUint64(8, BigInt(child.ino), true);
            dv.setUint32(16, nameBytes.length, true);
            dv.setUint8(20, child.type);
            rec.set(nameBytes, DIRENT_SIZE);
            const n = Math.min(rec.length, len - w);
            out.set(rec.subarray(0, n), w);
            w += n;
          }
          this.dv().setUint32(nwrittenP, w, true);
          return E.SUCCESS;
        },

        path_open(dirfd, _dirflags, pathP, pathLen, oflags, rightsBase, _rightsInheriting, fdflags, fdP) {
          const d = this.fd(dirfd);
          if (!d) return E.BADF;
          if (d.kind !== "dir") return E.NOTDIR;
          const path = this.str(pathP, pathLen);
          if (oflags & (OFLAG.CREAT | OFLAG.TRUNC | OFLAG.EXCL)) return E.ROFS;
          if (fdflags & (FDFLAG.APPEND | FDFLAG.DSYNC | FDFLAG.SYNC | FDFLAG.RSYNC)) return E.ROFS;
          const { node, errno } = this.fs.lookup(d.node, path);
          if (errno) return errno;
          if ((BigInt.asUintN(64, BigInt(rightsBase)) & WRITE_RIGHTS) !== 0n) {
            return node.type === FILETYPE.DIRECTORY ? E.ISDIR : E.ROFS;
          }
          if ((oflags & OFLAG.DIRECTORY) && node.type !== FILETYPE.DIRECTORY) return E.NOTDIR;
          const fd = this.nextFd++;
          this.fds.set(fd, node.type === FILETYPE.DIRECTORY
            ? { kind: "dir", node, flags: fdflags }
            : { kind: "file", node, pos: 0, flags: fdflags });
          this.dv().setUint32(fdP, fd, true);
          return E.SUCCESS;
        },
        path_filestat_get(dirfd, _flags, pathP, pathLen, p) {
          const d = this.fd(dirfd);
          if (!d) return E.BADF;
          if (d.kind !== "dir") return E.NOTDIR;
          const { node, errno } = this.fs.lookup(d.node, this.str(pathP, pathLen));
          if (errno) return errno;
          this.writeFilestat(p, node, false);
          return E.SUCCESS;
        },
      };
      const out = {};
      for (const [name, f] of Object.entries(fns)) out[name] = wrap(name, f);
      return { wasi_snapshot_preview1: out };
    }

    putStrings(list, ptrsP, bufP) {
      const dv = this.dv();
      let at = bufP;
      list.forEach((s, i) => {
        const b = this.enc.encode(s);
        dv.setUint32(ptrsP + 4 * i, at, true);
        this.bytes(at, b.length + 1).set([...b, 0]);
        at += b.length + 1;
      });
      return E.SUCCESS;
    }

    readAt(data, offset, iovs) {
      let at = Number(offset);
      let got = 0;
      for (const b of iovs) {
        if (at >= data.length) break;
        const n = Math.min(b.length, data.length - at);
        b.set(data.subarray(at, at + n));
        at += n;
        got += n;
      }
      return got;
    }
  }

  // checkImports fails loudly, before instantiation, when the module
  // imports a function that the given import object lacks.
  function checkImports(module, imports) {
    const missing = WebAssembly.Module.imports(module)
      .filter((im) => im.kind === "function" && !(imports[im.module] && typeof imports[im.module][im.name] !== "undefined"))
      .map((im) => `${im.module}.${im.name}`);
    if (missing.length > 0) {
      throw new Error(`engine.wasm imports ${missing.join(", ")}, which this host does not provide`);
    }
  }

  global.LogitscopeWASI = { WASI, MemFS, BlobFile, GuestFile, ProcExit, checkImports, errno: E };
})(typeof self !== "undefined" ? self : globalThis);
