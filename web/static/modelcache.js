// modelcache.js: a served model's files through Cache Storage, for the
// worker (importScripts) and the page (a plain <script>), so that a file
// both need (tokenizer.json, tokenizer_config.json) crosses the network
// once: whichever asks first fetches and stores it, the other reads the
// cache. Defines self.LogitscopeModelCache (web/BRIDGE.md).
//
// A file is stored under /models/<name>/<path>?sha256=<hex> once its size
// and sha256 match what GET /models/ lists, and handed back as the Blob
// Cache Storage gives, which the browser keeps on disk: the worker reads
// it a slice at a time (wasi.js BlobFile), so a model's bytes are not held
// in the worker besides the engine's copy.
"use strict";

(function (global) {
  const CACHE_NAME = "logitscope-models-v1";

  const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");

  const fileURL = (name, path) =>
    `/models/${encodeURIComponent(name)}/${path.split("/").map(encodeURIComponent).join("/")}`;

  let opened = null; // the cache, or null where there is none; once per realm

  // open is the cache, or null (with a note) where there is none: Cache
  // Storage needs a secure context.
  async function open(note) {
    if (opened) return opened;
    if (typeof caches === "undefined") {
      note("Cache Storage is not available here (not a secure context?): files are not kept");
      return null;
    }
    try {
      opened = await caches.open(CACHE_NAME);
    } catch (e) {
      note(`Cache Storage: ${e.message}: files are not kept`);
      return null;
    }
    return opened;
  }

  // download fetches one file whole, with progress(n) per chunk, and
  // checks its size.
  async function download(name, f, url, progress) {
    let r;
    try {
      r = await fetch(url, { cache: "no-store" });
    } catch (e) {
      throw new Error(`model ${name}: ${f.path}: ${e.message}`);
    }
    if (!r.ok) throw new Error(`model ${name}: ${f.path}: HTTP ${r.status}`);
    let buf = new Uint8Array(f.size);
    let n = 0;
    if (!r.body) {
      buf = new Uint8Array(await r.arrayBuffer());
      progress(buf.length);
      n = buf.length;
    } else {
      const reader = r.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (n + value.length > buf.length) {
          const grown = new Uint8Array(Math.max(2 * buf.length, n + value.length));
          grown.set(buf.subarray(0, n));
          buf = grown;
        }
        buf.set(value, n);
        n += value.length;
        progress(value.length);
      }
    }
    if (n !== f.size) throw new Error(`model ${name}: ${f.path}: got ${n} bytes, the server listed ${f.size}`);
    return buf.length === n ? buf : buf.slice(0, n);
  }

  // get returns file f ({path, size, sha256}) of model name as
  // {data, cached}: data is the cached Blob, or a Uint8Array where there is
  // no Cache Storage (or it would not keep the file); cached says no byte
  // crossed the network (useCache false: the cache is neither read nor
  // written). A miss is fetched whole, checked against the
  // listed size and sha256, stored, and dropped for the stored Blob, so
  // the fetched copy lives only until the next collection. progress(n)
  // gets the bytes as they arrive (a hit's all at once).
  async function get(name, f, { progress = () => {}, note = (l) => console.warn(l), useCache = true } = {}) {
    const cache = useCache ? await open(note) : null;
    const url = fileURL(name, f.path);
    const key = `${url}?sha256=${f.sha256}`;
    if (cache) {
      try {
        const hit = await cache.match(key);
        if (hit) {
          const blob = await hit.blob();
          if (blob.size === f.size) { // else a damaged entry: fetch again
            progress(blob.size);
            return { data: blob, cached: true };
          }
        }
      } catch (e) {
        // an unreadable entry: fetch again
      }
    }
    let data = await download(name, f, url, progress);
    const sum = hex(await crypto.subtle.digest("SHA-256", data));
    if (sum !== f.sha256) throw new Error(`model ${name}: ${f.path}: sha256 ${sum}, the server listed ${f.sha256}`);
    if (!cache) return { data, cached: false };
    try {
      await cache.put(key, new Response(data, { headers: { "Content-Type": "application/octet-stream" } }));
      const stored = await cache.match(key);
      const blob = stored && await stored.blob();
      if (blob && blob.size === f.size) data = blob;
    } catch (e) {
      note(`Cache Storage: not keeping ${f.path}: ${e.message}`);
    }
    return { data, cached: false };
  }

  // bytes is get's file as a Uint8Array, for the page's own reading
  // (tokenizer.json): the Blob read into memory.
  async function bytes(name, f) {
    const { data } = await get(name, f);
    return data instanceof Uint8Array ? data : new Uint8Array(await data.arrayBuffer());
  }

  global.LogitscopeModelCache = { CACHE_NAME, get, bytes, fileURL };
})(typeof window !== "undefined" ? window : self);
