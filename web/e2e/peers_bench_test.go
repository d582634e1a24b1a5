package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/varianttest"
	"logitscope/internal/quant"
	"logitscope/internal/sys/tempfile"
	"logitscope/internal/text/tokenizer"
)

// peersDir holds the page's peers, installed by make bench-deps.
var peersDir = filepath.Join(RepoRoot(), "web", "e2e", "testdata", "peers", "node_modules")

// pagePeerPresets are BenchmarkPagePeers' models, as engine's
// peerPresets: Qwen2.5-0.5B's geometry cut to two layers, SmolLM2-135M's
// and Qwen2.5-0.5B's whole (a page on the CPU path holds its weights in
// wasm memory: the whole one's q8 fits, its f32 would not).
func pagePeerPresets() []synth.Preset {
	return []synth.Preset{synth.TwoLayer("qwen2.5-0.5b"), synth.Presets["smollm2-135m"], synth.Presets["qwen2.5-0.5b"]}
}

// BenchmarkPagePeers runs the page on engine.wasm's CPU path (Chromium
// without WebGPU) beside wllama (@wllama/wllama, llama.cpp compiled to
// wasm, on its CPU backend) in Chromium on the same weights: the page's
// variant against its GGUF export (q8 as Q8_0, q4 as Q4_0, bit for bit),
// the same prompt (wllama gets the text of the page's prompt tokens and
// must read it back as as many), 32 decoded tokens after the first. Both run
// single-threaded here: engine.wasm is one Go thread, and wllama takes
// its single-thread build without cross-origin isolation.
//
// The page's numbers are its own timings (snapshot.Timing): prefill is
// the prompt's tokens over the time to the first logit row read back,
// decode the later rows over the rest of the reference's run; the best
// of b.N fresh browsers. wllama's are llama.cpp's own timings of a
// completion (prompt_ms, predicted_ms), the best of b.N after a warm-up,
// in one browser. Peak RSS is the largest VmHWM among each browser's
// processes (the renderer that runs the worker; performance.memory sees
// only the main thread).
//
// On WebGPU (SwiftShader here) the page runs the float model beside
// onnxruntime-web's WebGPU provider on an ONNX export of the same
// checkpoint (bench/onnx/export.py: plain PyTorch, the checkpoint's
// weights in float32), checked to give the page's logits at the prompt's
// last position, timed as the page is timed (ortPage).
func BenchmarkPagePeers(b *testing.B) {
	RequireUI(b)
	wllama := filepath.Join(peersDir, "@wllama", "wllama", "esm")
	if _, err := os.Stat(filepath.Join(wllama, "index.js")); err != nil {
		b.Skipf("wllama is not installed (make bench-deps): %v", err)
	}
	const gen = 32
	for _, preset := range pagePeerPresets() {
		for _, vname := range []string{"q8", "q4"} {
			b.Run(preset.Name+"/"+vname+"/cpu", func(b *testing.B) {
				dir, gguf := pagePeerModel(b, preset, vname)
				page, ids, _ := pageSpeed(b, preset.Name, dir, vname, "cpu", gen)
				reportPeer(b, page, wllamaSpeed(b, wllama, dir, gguf, ids, gen, b.N))
			})
		}
		b.Run(preset.Name+"/f32/webgpu", func(b *testing.B) {
			dir, err := synth.CachedPreset(preset, 0)
			if err != nil {
				b.Fatal(err)
			}
			onnx := onnxExport(b, dir)
			page, ids, first := pageSpeed(b, preset.Name, dir, "f32", "webgpu", gen)
			reportPeer(b, page, ortSpeed(b, onnx, ids, gen, b.N, first))
		})
	}
}

// pageSpeed runs the page's greedy autorun link on the model in dir,
// variant vname on both sides, gen+1 tokens past any stop, on device
// ("cpu": Chromium without WebGPU; "webgpu"), in b.N fresh browsers, and
// returns its best speed, the prompt's token ids and the first row's
// logits (the prompt's last position).
func pageSpeed(b *testing.B, name, dir, vname, device string, gen int) (speed, []int, []float32) {
	site := StartSite(b, SiteModel{name, dir})
	spec := snapshot.NewSpec()
	spec.Model, spec.Ref, spec.Test, spec.Device = name, vname, vname, map[string]string{"cpu": "auto", "webgpu": "gpu"}[device]
	spec.Prompt, spec.MaxNew, spec.Stops = "Benchmark the page against its peers, token by token.", gen+1, &[]int{}
	q := spec.Query()
	q.Set("autorun", "1")
	opts := webgpuOptions()
	if device == "cpu" {
		opts = []chromedp.ExecAllocatorOption{chromedp.Flag("enable-unsafe-webgpu", false)}
	}
	var best speed
	var ids []int
	var first []float32
	for range b.N {
		br := NewBrowser(b, opts...)
		if state := br.Open(site.URL+"/?"+q.Encode(), 10*time.Minute); state != "done" {
			b.Fatalf("the page's run ended in %q: %s", state, Eval[string](br, `String(window.logitscope.error)`))
		}
		doc, _ := pageDoc(b, br)
		if doc.Ref.Device != device || doc.Ref.Rows != gen+1 {
			b.Fatalf("the page ran %d rows on %q, want %d on %q", doc.Ref.Rows, doc.Ref.Device, gen+1, device)
		}
		if device == "webgpu" {
			checkWebGPU(b, doc.Ref.Device+" "+doc.Ref.Adapter)
		}
		// The peak before this test reads the logits: the page encodes
		// them when a script asks.
		rss := chromiumPeakRSS(b, br)
		lg := Eval[pageLogits](br, `window.logitscope.logits`)
		first = decodeRows(b, lg.Ref)[:lg.Vocab]
		t := doc.Timing
		best.best(speed{
			prefill: float64(len(doc.PromptIDs)) / t.FirstToken * 1e3,
			decode:  float64(gen) / (t.RefRun - t.FirstToken) * 1e3,
			rss:     rss,
		})
		ids = doc.PromptIDs
	}
	return best, ids, first
}

// reportPeer reports the page's measures and the peer's (cmd/benchtable
// turns each pair into a ratio).
func reportPeer(b *testing.B, page, peer speed) {
	b.ReportMetric(page.prefill, "prefill-tok/s")
	b.ReportMetric(peer.prefill, "peer-prefill-tok/s")
	b.ReportMetric(page.decode, "decode-tok/s")
	b.ReportMetric(peer.decode, "peer-decode-tok/s")
	b.ReportMetric(float64(page.rss)/1e6, "peakRSS-MB")
	b.ReportMetric(float64(peer.rss)/1e6, "peer-peakRSS-MB")
}

// speed is one side's best: tokens/s and the peak resident set in bytes.
type speed struct {
	prefill, decode float64
	rss             int64
}

func (s *speed) best(o speed) {
	s.prefill, s.decode, s.rss = max(s.prefill, o.prefill), max(s.decode, o.decode), max(s.rss, o.rss)
}

// pagePeerModel is the cached preset with its variant vname, and the GGUF
// export of that variant (shared with engine's benchmarks).
func pagePeerModel(b *testing.B, p synth.Preset, vname string) (dir, gguf string) {
	dir, _ = varianttest.Cached(b, p, quant.Scheme(vname))
	return dir, ggufmodeltest.Cached(b, dir, vname)
}

// wllamaPage runs wllama on /model.gguf: a warm-up completion, then reps
// timed ones of the prompt (the query's text, which must make n tokens),
// gen tokens each, greedy, past any end of text; window.peer holds the
// best of llama.cpp's own timings. The prompt goes as text because
// wllama 3.8.1's glue breaks on a prompt of token ids (RangeError:
// Invalid typed array length), and so it does on a completion whose text
// is not UTF-8, which a synthetic model's byte tokens make: /bias.json
// bans the tokens that are not whole characters (a logit bias in the
// sampler, after the forward pass that is timed).
const wllamaPage = `<!doctype html>
<title>wllama</title>
<script type="module">
import { Wllama } from '/wllama/index.js';
const q = new URLSearchParams(location.search);
const text = q.get('text'), n = Number(q.get('n')), gen = Number(q.get('gen')), reps = Number(q.get('reps'));
try {
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true });
  await w.loadModelFromUrl(location.origin + '/model.gguf', { n_ctx: n + gen + 16, n_gpu_layers: 0, useCache: false });
  const logit_bias = await (await fetch('/bias.json')).json();
  const peer = { prefill: 0, decode: 0, threads: w.getNumThreads(), multithread: w.isMultithread() };
  for (let r = 0; r <= reps; r++) {
    const res = await w.createCompletion({ prompt: text, max_tokens: gen, temp: 0, ignore_eos: true, cache_prompt: false, logit_bias });
    const t = res.timings;
    if (t.prompt_n !== n || t.predicted_n !== gen) throw new Error('wllama ran ' + JSON.stringify(t));
    if (r === 0) continue; // the warm-up
    peer.prefill = Math.max(peer.prefill, t.prompt_n / t.prompt_ms * 1e3);
    peer.decode = Math.max(peer.decode, t.predicted_n / t.predicted_ms * 1e3);
  }
  window.peer = peer;
  document.body.dataset.state = 'done';
} catch (e) {
  window.peerError = String(e && e.stack || e);
  document.body.dataset.state = 'error';
}
</script>
<body></body>
`

// wllamaSpeed serves wllama's files, its page and the GGUF export in dir,
// and runs the page in a fresh Chromium (WebGPU off, so that wllama
// cannot take it) on the text of ids (special tokens kept), which
// llama.cpp must read back as len(ids) tokens.
func wllamaSpeed(b *testing.B, wllama, dir, gguf string, ids []int, gen, reps int) speed {
	tk, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	bias := map[string]float64{}
	for id := range tk.VocabSize() {
		if strings.ContainsRune(tk.Decode([]int{id}, false), utf8.RuneError) {
			bias[strconv.Itoa(id)] = -1e4
		}
	}
	biasFile := filepath.Join(b.TempDir(), "bias.json")
	raw, err := json.Marshal(bias)
	if err == nil {
		err = os.WriteFile(biasFile, raw, 0o644)
	}
	if err != nil {
		b.Fatal(err)
	}
	srv := servePeer(b, wllamaPage, map[string]string{"/wllama/": wllama, "/model.gguf": gguf, "/bias.json": biasFile})
	br := NewBrowser(b, chromedp.Flag("enable-unsafe-webgpu", false))
	var got struct {
		Prefill, Decode float64
		Threads         int
		Multithread     bool
	}
	q := peerQuery(gen, reps)
	q.Set("text", tk.Decode(ids, false))
	q.Set("n", strconv.Itoa(len(ids)))
	peerRun(b, br, srv.URL+"/?"+q.Encode(), &got)
	b.Logf("wllama: %d thread(s), multi-thread build %v", got.Threads, got.Multithread)
	return speed{prefill: got.Prefill, decode: got.Decode, rss: chromiumPeakRSS(b, br)}
}

// ortPage runs onnxruntime-web's WebGPU provider on /prefill.onnx and
// /decode.onnx (bench/onnx/export.py): a warm-up, then reps timed passes
// of the prompt's token ids as one batch, then gen single-token steps
// fed the cache, each reading its logits row back as the page does; the
// cache stays in GPU buffers between steps, as onnxruntime-web advises.
// window.first is the prompt's last row of the first pass.
const ortPage = `<!doctype html>
<title>onnxruntime-web</title>
<script type="module">
import * as ort from '/ort/ort.webgpu.min.mjs';
const q = new URLSearchParams(location.search);
const ids = q.get('ids').split(',').map(Number), gen = Number(q.get('gen')), reps = Number(q.get('reps'));
try {
  if (!navigator.gpu) throw new Error('no navigator.gpu');
  ort.env.wasm.wasmPaths = '/ort/';
  ort.env.wasm.numThreads = 1;
  const opt = { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer' };
  const prefill = await ort.InferenceSession.create('/prefill.onnx', opt);
  const decode = await ort.InferenceSession.create('/decode.onnx', opt);
  const tokens = a => new ort.Tensor('int64', BigInt64Array.from(a.map(BigInt)), [1, a.length]);
  const release = out => { for (const n in out) out[n].dispose(); };
  const peer = { prefill: 0, decode: 0 };
  for (let r = 0; r <= reps; r++) {
    const t0 = performance.now();
    let out = await prefill.run({ input_ids: tokens(ids) });
    const logits = await out.logits.getData();
    const t1 = performance.now();
    if (r === 0) {
      const vocab = logits.length / ids.length;
      window.first = Array.from(logits.subarray((ids.length - 1) * vocab));
    }
    for (let i = 0; i < gen; i++) {
      const feeds = { input_ids: tokens([ids[i % ids.length]]) };
      for (const n of decode.inputNames) if (n.startsWith('past_')) feeds[n] = out['present_' + n.slice(5)];
      const next = await decode.run(feeds);
      release(out);
      out = next;
      await out.logits.getData();
    }
    const t2 = performance.now();
    release(out);
    if (r === 0) continue; // the warm-up: shaders compile
    peer.prefill = Math.max(peer.prefill, ids.length / (t1 - t0) * 1e3);
    peer.decode = Math.max(peer.decode, gen / (t2 - t1) * 1e3);
  }
  window.peer = peer;
  document.body.dataset.state = 'done';
} catch (e) {
  window.peerError = String(e && e.stack || e);
  document.body.dataset.state = 'error';
}
</script>
<body></body>
`

// ortSpeed serves onnxruntime-web, its page and the ONNX export in onnx,
// runs the page in a fresh Chromium with WebGPU (SwiftShader here), and
// checks that the export is the page's model: the prompt's last row
// within 1e-3 of the largest of first, the page's row.
func ortSpeed(b *testing.B, onnx string, ids []int, gen, reps int, first []float32) speed {
	ort := filepath.Join(peersDir, "onnxruntime-web", "dist")
	if _, err := os.Stat(filepath.Join(ort, "ort.webgpu.min.mjs")); err != nil {
		b.Skipf("onnxruntime-web is not installed (make bench-deps): %v", err)
	}
	srv := servePeer(b, ortPage, map[string]string{"/ort/": ort,
		"/prefill.onnx": filepath.Join(onnx, "prefill.onnx"), "/decode.onnx": filepath.Join(onnx, "decode.onnx")})
	br := NewBrowser(b, webgpuOptions()...)
	var got struct{ Prefill, Decode float64 }
	q := peerQuery(gen, reps)
	q.Set("ids", joinIDs(ids))
	peerRun(b, br, srv.URL+"/?"+q.Encode(), &got)
	checkWebGPU(b, "webgpu "+Eval[string](br, `navigator.gpu.requestAdapter().then(a => [a.info.vendor, a.info.architecture, a.info.description].join(" "))`))
	row := Eval[[]float32](br, `window.first`)
	if len(row) != len(first) {
		b.Fatalf("onnxruntime-web's row has %d logits, the page's %d", len(row), len(first))
	}
	var worst, scale float64
	for i := range row {
		worst = max(worst, math.Abs(float64(row[i]-first[i])))
		scale = max(scale, math.Abs(float64(first[i])))
	}
	if worst > 1e-3*scale {
		b.Fatalf("the ONNX export is not the page's model: its last prompt row differs by %g (largest logit %g)", worst, scale)
	}
	b.Logf("onnxruntime-web's last prompt row is within %.2g of the page's (largest logit %.3g)", worst, scale)
	return speed{prefill: got.Prefill, decode: got.Decode, rss: chromiumPeakRSS(b, br)}
}

// onnxExport is the ONNX export of the model in dir (bench/onnx/export.py
// with Debian's PyTorch: $LOGITSCOPE_PYTHON, else /usr/bin/python3), made
// once into dir/onnx. It skips when PyTorch or onnx are missing, or the
// model is too large to export.
func onnxExport(b *testing.B, dir string) string {
	out := filepath.Join(dir, "onnx")
	if _, err := os.Stat(filepath.Join(out, "decode.onnx")); err == nil {
		return out
	}
	python := os.Getenv("LOGITSCOPE_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if msg, err := exec.Command(python, "-c", "import torch, onnx").CombinedOutput(); err != nil {
		b.Skipf("no PyTorch to export the ONNX model with (apt-get install python3-torch python3-onnx, or set LOGITSCOPE_PYTHON): %v\n%s", err, msg)
	}
	tmp, err := tempfile.Mkdir(out)
	if err != nil {
		b.Fatal(err)
	}
	defer tempfile.Remove(tmp)
	cmd := exec.Command(python, filepath.Join(RepoRoot(), "bench", "onnx", "export.py"), dir, tmp)
	msg, err := cmd.CombinedOutput()
	if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 3 {
		b.Skipf("bench/onnx/export.py: %s", msg)
	}
	if err == nil {
		err = os.Chmod(tmp, 0o755) // Mkdir made it private
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err != nil {
		b.Fatalf("bench/onnx/export.py %s: %v\n%s", dir, err, msg)
	}
	return out
}

// servePeer serves page at / and, at each path of mounts, a directory
// (a path ending in /) or a file.
func servePeer(b testing.TB, page string, mounts map[string]string) *httptest.Server {
	mux := http.NewServeMux()
	for path, local := range mounts {
		if strings.HasSuffix(path, "/") {
			mux.Handle(path, http.StripPrefix(path, http.FileServer(http.Dir(local))))
		} else {
			mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, local) })
		}
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv
}

// joinIDs is token ids as a peer page's query takes them: 1,2,3.
func joinIDs(ids []int) string {
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.Itoa(id)
	}
	return strings.Join(list, ",")
}

// peerQuery is a peer page's query: the steps and the timed passes.
func peerQuery(gen, reps int) url.Values {
	return url.Values{"gen": {strconv.Itoa(gen)}, "reps": {strconv.Itoa(reps)}}
}

// peerRun opens a peer page and decodes its window.peer into v. The
// timeout is long: onnxruntime-web's warm-up and timed passes of 32
// steps each took over 10 minutes on SwiftShader under load.
func peerRun(b testing.TB, br *Browser, url string, v any) {
	if state := br.Open(url, 45*time.Minute); state != "done" {
		b.Fatalf("%s: %s", url, Eval[string](br, `String(window.peerError)`))
	}
	if err := json.Unmarshal([]byte(Eval[string](br, `JSON.stringify(window.peer)`)), v); err != nil {
		b.Fatal(err)
	}
}

// chromiumPeakRSS is the largest peak resident set (VmHWM) among the
// browser's processes, in bytes: the renderer that runs the page and its
// workers, or the browser or GPU process when they are larger.
func chromiumPeakRSS(b *testing.B, br *Browser) int64 {
	c := chromedp.FromContext(br.Ctx)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		b.Fatal("chromiumPeakRSS: no browser process")
	}
	root := c.Browser.Process().Pid
	parents := map[int]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 {
			parents[pid], _ = strconv.Atoi(f[1])
		}
	}
	var peak int64
	for pid := range parents {
		p := pid
		for p != root && p > 1 {
			p = parents[p]
		}
		if p != root {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
				peak = max(peak, n*1024)
			}
		}
	}
	if peak == 0 {
		b.Fatalf("chromiumPeakRSS: no process under the browser's pid %d", root)
	}
	return peak
}
