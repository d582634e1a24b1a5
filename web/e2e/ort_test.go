package e2e

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/engine/onnxmodeltest"
	"logitscope/internal/text/tokenizer"
)

// ortRowsPage runs onnxruntime-web's execution provider ep (wasm:
// single-threaded; webgpu) on /model.onnx (onnxmodel.Export: input_ids ->
// every position's logits) over the query's ids and leaves the rows in
// window.rows, row after row.
const ortRowsPage = `<!doctype html>
<title>onnxruntime-web rows</title>
<script type="module">
import * as ort from '/ort/ort.webgpu.min.mjs';
const q = new URLSearchParams(location.search);
const ids = q.get('ids').split(',').map(BigInt), ep = q.get('ep');
try {
  ort.env.wasm.wasmPaths = '/ort/';
  ort.env.wasm.numThreads = 1;
  const s = await ort.InferenceSession.create('/model.onnx', { executionProviders: [ep] });
  const out = await s.run({ input_ids: new ort.Tensor('int64', BigInt64Array.from(ids), [1, ids.length]) });
  window.rows = Array.from(await out.logits.getData());
  window.peer = { rows: out.logits.dims[1], vocab: out.logits.dims[2] };
  document.body.dataset.state = 'done';
} catch (e) {
  window.peerError = String(e && e.stack || e);
  document.body.dataset.state = 'error';
}
</script>
<body></body>
`

// TestUIORTPanelRows runs a panel on the demo (the page's engine.wasm,
// f32 against q4, on the CPU path) and, in the same Chromium,
// onnxruntime-web on the ONNX export of the demo's q4 variant (its
// matrices MatMulNBits nodes holding the variant's codes) over the
// panel's window, on its wasm provider and on its WebGPU one (SwiftShader
// here): every position's full row must be the page's q4 row within 1e-5
// of the largest |logit|, the runtimes' float32 summation orders apart.
// It is the in-browser peer that gives full rows for the page's own ids
// (wllama takes text and returns sampled tokens' logits only).
func TestUIORTPanelRows(t *testing.T) {
	RequireUI(t)
	ort := ortDist(t)
	site := StartSite(t)
	spec := snapshot.NewSpec()
	spec.Mode, spec.Device = snapshot.Panel, "cpu"
	spec.Panel = "The page and onnxruntime-web read the same ids, and each gives a full row of logits at every position."
	q := spec.Query()
	q.Set("autorun", "1")
	br := NewBrowser(t)
	if state := br.Open(site.URL+"/?"+q.Encode(), 5*time.Minute); state != "done" {
		br.Screenshot("error")
		t.Fatalf("the run ended in %q: %s", state, Eval[string](br, `String(window.logitscope.error)`))
	}
	doc, _ := pageDoc(t, br)
	lg := Eval[pageLogits](br, `window.logitscope.logits`)
	page := decodeRows(t, lg.Test)

	// One window: its first token (the model's BOS, as a document
	// starts) then the panel's tokens; row i predicts token i+1
	// (doc.Tokens).
	tk, err := tokenizer.Load(filepath.Join(site.DemoDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	text := tk.Encode(spec.Panel)
	if len(doc.Windows) != 1 || doc.Test.Rows != len(doc.Tokens) || !slices.Equal(doc.Tokens[len(doc.Tokens)-len(text):], text) {
		t.Fatalf("the page ran %d windows, %d rows predicting %v; want one window ending in the panel's %v", len(doc.Windows), doc.Test.Rows, doc.Tokens, text)
	}
	ids := append([]int{doc.Windows[0].Token}, doc.Tokens...)

	model := filepath.Join(t.TempDir(), "model.onnx")
	onnxmodeltest.Export(t, site.DemoDir, spec.Test, model, spec.Window)
	srv := servePeer(t, ortRowsPage, map[string]string{"/ort/": ort, "/model.onnx": model})
	for _, ep := range []string{"wasm", "webgpu"} { // webgpu: SwiftShader here
		var shape struct{ Rows, Vocab int }
		peerRun(t, br, srv.URL+"/?ep="+ep+"&ids="+joinIDs(ids), &shape)
		rows := Eval[[]float32](br, `window.rows`)
		if shape.Rows != len(ids) || shape.Vocab != lg.Vocab || len(rows) != len(ids)*lg.Vocab {
			t.Fatalf("onnxruntime-web (%s) gave %d rows of %d (%d logits), want %d of %d", ep, shape.Rows, shape.Vocab, len(rows), len(ids), lg.Vocab)
		}
		var worst, scale float64
		for i := range doc.Test.Rows {
			for j := range lg.Vocab {
				ours := float64(page[i*lg.Width+j])
				worst = max(worst, math.Abs(ours-float64(rows[i*lg.Vocab+j])))
				scale = max(scale, math.Abs(ours))
			}
		}
		t.Logf("%s: %d positions × %d logits: max |diff| %.3g, max |logit| %.3g, ratio %.2g", ep, doc.Test.Rows, lg.Vocab, worst, scale, worst/scale)
		if worst > 1e-5*scale {
			t.Errorf("onnxruntime-web's %s rows differ from the page's q4 rows by %g (largest logit %g)", ep, worst, scale)
		}
	}
}
