package e2e

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/engine/onnxmodeltest"
	"logitscope/internal/sys/prereq"
)

// ortDist is onnxruntime-web's dist directory as make deps installs it;
// the test is a prereq miss without it.
func ortDist(t *testing.T) string {
	t.Helper()
	ort := filepath.Join(RepoRoot(), "internal", "model", "onnxmodel", "testdata", "ort", "node_modules", "onnxruntime-web", "dist")
	if _, err := os.Stat(filepath.Join(ort, "ort.webgpu.min.js")); err != nil {
		prereq.Missing(t, prereq.Node, "onnxruntime-web is not installed (make deps): "+err.Error())
	}
	return ort
}

// onnxDemo is a copy of the demo model with its q4 variant exported as
// onnx/q4.onnx for inputs of up to maxLen tokens, as logitscope export
// --variant q4 --onnx DEMO/onnx/q4.onnx writes it; a copy, since the
// demo's own directory is shared by every test.
func onnxDemo(t *testing.T, maxLen int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "onnxdemo")
	if err := os.CopyFS(dir, os.DirFS(DemoDir(t))); err != nil {
		t.Fatal(err)
	}
	onnxmodeltest.Export(t, dir, "q4", filepath.Join(dir, "onnx", "q4.onnx"), maxLen)
	return dir
}

// pageRun opens an autorun link of spec and returns the page's document
// and rows.
func pageRun(t *testing.T, br *Browser, site *Site, spec snapshot.Spec) (*snapshot.Doc, pageLogits) {
	t.Helper()
	q := spec.Query()
	q.Set("autorun", "1")
	t0 := time.Now()
	if state := br.Open(site.URL+"/?"+q.Encode(), 5*time.Minute); state != "done" {
		br.Screenshot("error")
		t.Fatalf("%s vs %s (%s, %s): the run ended in %q: %s", spec.Ref, spec.Test, spec.Mode, spec.Device, state, Eval[string](br, `String(window.logitscope.error)`))
	}
	doc, _ := pageDoc(t, br)
	t.Logf("%s vs %s (%s, %s): %d rows in %v; test side %s, %s; open %.0f ms, run %.0f ms",
		spec.Ref, spec.Test, spec.Mode, spec.Device, doc.Test.Rows, time.Since(t0).Round(time.Millisecond), doc.Test.Device, doc.Test.Adapter, doc.Timing.OpenTest, doc.Timing.TestRun)
	return doc, Eval[pageLogits](br, `window.logitscope.logits`)
}

const ortPanel = "The page runs the reference through engine.wasm and the test side through onnxruntime-web, on the same ids, window after window."

// TestUIORTSide chooses an ONNX export of the demo's q4 variant
// (onnx/q4.onnx, run by onnxruntime-web in the page's worker) as the test
// side of the page's own comparison. Against engine.wasm's q4 its rows
// are the same weights through another runtime: every row within 1e-5
// of the largest |logit|, a mean KLD of ~0 and no flips, on the wasm
// provider (device cpu) and the WebGPU one (gpu: SwiftShader here),
// which the side's device and adapter name. Against f32 each position's
// KLD is engine.wasm's q4's to 1e-6, in a panel and in a greedy run
// (the export fed the reference's tokens, forced).
func TestUIORTSide(t *testing.T) {
	RequireUI(t)
	demo := SiteModel{"onnxdemo", onnxDemo(t, 64)}
	site := StartORTSite(t, ortDist(t), demo)
	br := NewBrowser(t)
	spec := snapshot.NewSpec()
	spec.Model, spec.Mode, spec.Panel, spec.Window = "onnxdemo", snapshot.Panel, ortPanel, 24

	t.Run("same weights", func(t *testing.T) {
		for _, c := range []struct{ device, ep, docDevice string }{{"cpu", "wasm", "cpu"}, {"gpu", "webgpu", "webgpu"}} {
			s := spec
			s.Ref, s.Test, s.Device = "q4", "onnx/q4.onnx", c.device
			doc, lg := pageRun(t, br, site, s)
			if doc.Test.Device != c.docDevice || !strings.HasPrefix(doc.Test.Adapter, "onnxruntime-web") || !strings.HasSuffix(doc.Test.Adapter, " "+c.ep) {
				t.Errorf("%s: the test side ran on %q, %q; want %s through onnxruntime-web's %s provider", c.device, doc.Test.Device, doc.Test.Adapter, c.docDevice, c.ep)
			}
			ref, test := decodeRows(t, lg.Ref), decodeRows(t, lg.Test)
			if len(ref) != len(test) || len(ref) != doc.Test.Rows*lg.Width || lg.Width != lg.Vocab {
				t.Fatalf("%s: %d and %d floats for %d rows of %d", c.device, len(ref), len(test), doc.Test.Rows, lg.Vocab)
			}
			var worst float64
			for i := range doc.Test.Rows {
				var diff, scale float64
				for j := range lg.Vocab {
					diff = max(diff, math.Abs(float64(ref[i*lg.Width+j]-test[i*lg.Width+j])))
					scale = max(scale, math.Abs(float64(ref[i*lg.Width+j])))
				}
				worst = max(worst, diff/scale)
				if diff > 1e-5*scale {
					t.Errorf("%s: row %d: max |q4 − onnx q4| %g, largest |logit| %g", c.device, i, diff, scale)
				}
			}
			sum := doc.Report.Summary
			t.Logf("%s: %d rows, worst max|diff|/max|logit| %.2g, mean KLD %.3g, flips %d", c.device, doc.Test.Rows, worst, sum.KLD.Value, sum.Flips)
			if sum.KLD.Value > 1e-9 || sum.Flips != 0 {
				t.Errorf("%s: mean KLD %g, %d flips; want ~0 and none", c.device, sum.KLD.Value, sum.Flips)
			}
		}
	})

	t.Run("against f32", func(t *testing.T) {
		greedy := spec
		greedy.Mode, greedy.Prompt, greedy.MaxNew = snapshot.Greedy, "What does a quantized model change?", 12
		for _, base := range []snapshot.Spec{spec, greedy} {
			base.Ref, base.Device = "f32", "cpu"
			base.Test = "q4"
			want, _ := pageRun(t, br, site, base)
			base.Test = "onnx/q4.onnx"
			got, _ := pageRun(t, br, site, base)
			wp, gp := want.Report.Positions, got.Report.Positions
			if len(wp) != len(gp) || len(wp) == 0 {
				t.Fatalf("%s: %d positions against q4, %d against onnx q4", base.Mode, len(wp), len(gp))
			}
			var worst float64
			for i := range wp {
				worst = max(worst, math.Abs(wp[i].KLD-gp[i].KLD))
			}
			t.Logf("%s: %d positions, mean KLD %.6g (q4) and %.6g (onnx q4), worst per-position |ΔKLD| %.2g",
				base.Mode, len(wp), want.Report.Summary.KLD.Value, got.Report.Summary.KLD.Value, worst)
			if worst > 1e-6 || math.Abs(want.Report.Summary.KLD.Value-got.Report.Summary.KLD.Value) > 1e-6 {
				t.Errorf("%s: the onnx q4 side's KLD differs from engine.wasm's q4 by up to %g", base.Mode, worst)
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		// A greedy reference would have to decode, which the export does
		// not; a window longer than the export's length is refused by name;
		// so is an onnx side on a server that does not serve onnxruntime-web.
		for _, c := range []struct {
			edit func(*snapshot.Spec)
			want string
		}{
			{func(s *snapshot.Spec) { s.Mode, s.Prompt, s.MaxNew, s.Ref = snapshot.Greedy, "Hi", 2, "onnx/q4.onnx" }, "does not decode"},
			{func(s *snapshot.Spec) { s.Window, s.Panel = 96, strings.Repeat(ortPanel+" ", 4) }, "takes at most 64"},
			// A server without -ort (make run with Go alone) still lists the
			// export; the side says what it needs.
			{nil, "this server does not serve it"},
		} {
			s, at := spec, site
			s.Ref, s.Test, s.Device = "q4", "onnx/q4.onnx", "cpu"
			if c.edit != nil {
				c.edit(&s)
			} else {
				at = StartSite(t, demo)
			}
			q := s.Query()
			q.Set("autorun", "1")
			if state := br.Open(at.URL+"/?"+q.Encode(), 5*time.Minute); state != "error" {
				t.Errorf("%s vs %s: the run ended in %q, want an error", s.Ref, s.Test, state)
				continue
			}
			msg := Eval[string](br, `String(window.logitscope.error)`)
			t.Logf("refused: %s", msg)
			if !strings.Contains(msg, c.want) {
				t.Errorf("the error %q does not say %q", msg, c.want)
			}
		}
	})
}
