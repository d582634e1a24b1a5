// Starts the page's program, ui.wasm, and shows why when it cannot. Loaded
// at the end of <body> (its elements exist by then), as a file since the
// page's Content-Security-Policy runs no inline script.
(function () {
  "use strict";
  const text = document.getElementById("boot-text");

  // failed shows a readable message where the UI would be.
  function failed(msg) {
    console.error("logitscope:", msg);
    window.logitscope.error = msg;
    document.body.dataset.state = "error";
    const boot = document.getElementById("boot");
    const box = document.createElement("div");
    box.className = "error";
    box.id = "error";
    box.setAttribute("role", "alert");
    const strong = document.createElement("strong");
    strong.textContent = "The page could not start";
    const pre = document.createElement("pre");
    pre.textContent = msg;
    box.append(strong, pre);
    (boot || document.getElementById("root") || document.body).append(box);
    if (text) text.textContent = "";
  }

  async function start() {
    if (typeof WebAssembly !== "object") {
      throw new Error("this browser has no WebAssembly");
    }
    if (typeof Go !== "function") {
      throw new Error("/static/wasm_exec.js did not load (it comes from $(go env GOROOT)/lib/wasm)");
    }
    const go = new Go();
    const url = "/static/ui.wasm";
    const resp = await fetch(url);
    if (!resp.ok) {
      throw new Error(url + ": HTTP " + resp.status + " " + resp.statusText);
    }
    let result;
    try {
      result = await WebAssembly.instantiateStreaming(resp.clone(), go.importObject);
    } catch (e) {
      // A server that does not say application/wasm: compile from bytes.
      if (!(e instanceof TypeError)) throw e;
      result = await WebAssembly.instantiate(await resp.arrayBuffer(), go.importObject);
    }
    go.run(result.instance).then(
      () => failed("the page's program (ui.wasm) stopped; the browser console says why"),
      (e) => failed("the page's program (ui.wasm) failed: " + (e && e.message || e)));
  }

  start().catch((e) => failed("ui.wasm: " + (e && e.message || e)));
})();
