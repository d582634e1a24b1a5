package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native"
	"logitscope/internal/sys/prereq"
	"logitscope/wasm/abi"
)

// The names of host/abi_test.go's cases: the page must run every one.
var goABICases = []string{
	"ls_open bad JSON",
	"ls_open unknown variant",
	"ls_open missing variant",
	"ls_open pointer outside ls_malloc blocks",
	"ls_request before ls_open",
	"ls_request unknown mode",
	"ls_step before ls_request",
	"ls_region and ls_result before ls_request",
	"ls_step twice without ls_feed",
	"ls_feed wrong length",
	"ls_feed without region",
	"greedy text prompt through ChatML",
	"ls_probe: every import",
	"upload_file outside the mount",
	"out-of-range handle: import error reaches ls_error",
	"trap discards the instance; the next Open works",
}

type abiResult struct {
	Name    string  `json:"name"`
	OK      bool    `json:"ok"`
	Message string  `json:"message"`
	MS      float64 `json:"ms"`
}

type abiInfo struct {
	Info    gpu.Info `json:"info"`
	Adapter string   `json:"adapter"`
	JSPI    bool     `json:"jspi"`
	Imports []string `json:"imports"`
	SetupMS float64  `json:"setupMs"`
	Agent   string   `json:"userAgent"`
}

// browserRun is one request run through LogitscopeBridge
// (window.identical.runs).
type browserRun struct {
	Name       string          `json:"name"`
	Device     string          `json:"device"` // "gpu" or "cpu"
	Request    json.RawMessage `json:"request"`
	Output     []int           `json:"output"`
	Targets    []int           `json:"targets"`
	Stopped    bool            `json:"stopped"`
	Vocab      int             `json:"vocab"`
	Width      int             `json:"width"` // float32 per row: the logits, then any routes
	Rows       []float32       `json:"rows"`
	FirstRowMS float64         `json:"firstRowMs"`
	MS         float64         `json:"ms"`
}

// Tolerance for WebGPU logits in the browser (Chromium 156's SwiftShader)
// against the same engine.wasm under wazero on gogpu/wgpu + lavapipe: two
// different GPUs whose float32 sums round differently, so a logit may
// differ by at most relTol times the largest |logit| of its row. Measured
// on the demo model (f32): greedy (40-token prompt, 8 new tokens) 3820 of
// 4096 logits differ in their bits, by at most 1.53e-05, i.e. 6.2e-07 of
// the row's largest |logit|; the panel (windows of 45 and 33 tokens, 76
// rows) by at most 3.43e-05, 1.7e-06 relative. relTol leaves a factor of 6
// above the worst. Tokens and panel targets must be identical.
const relTol = 1e-5

// TestABIInBrowser runs web/static/abitest.html: host/abi_test.go's cases
// against the JS host (wasi.js, gpu.js, worker.js) on WebGPU, the CPU
// cases, and greedy runs through LogitscopeBridge, whose logits must match
// wazero's. The cases assert the fixture's specifics (its vocabulary's
// region size, ChatML's prompt length), so the page runs on the same
// synthetic tiny preset with its q4 variant, not on the trained demo.
func TestABIInBrowser(t *testing.T) {
	tiny := familyModel(t, "tiny")
	site := StartSite(t, SiteModel{"tiny", tiny})
	b := NewBrowser(t)
	start := time.Now()
	state := b.Open(site.URL+"/static/abitest.html?model=tiny", 8*time.Minute)
	t.Logf("abitest.html finished in %.1f s (state %q)", time.Since(start).Seconds(), state)
	b.Screenshot("abitest")
	if state != "done" {
		msg, _ := EvalErr[string](b, `String(window.abiError)`)
		t.Fatalf("the ABI page could not run its cases: %s", msg)
	}
	info := Eval[abiInfo](b, `window.abiInfo`)
	results := Eval[[]abiResult](b, `window.abiResults`)

	t.Run("cases", func(t *testing.T) {
		seen := map[string]bool{}
		var failed []string
		for _, r := range results {
			seen[r.Name] = true
			if !r.OK {
				failed = append(failed, r.Name)
				t.Errorf("%s: %s", r.Name, r.Message)
				continue
			}
			note := ""
			if r.Message != "" {
				note = ": " + strings.ReplaceAll(r.Message, "\n", "; ")
			}
			t.Logf("ok %s (%.0f ms)%s", r.Name, r.MS, note)
		}
		for _, name := range goABICases {
			if !seen[name] {
				t.Errorf("the page has no case %q of host/abi_test.go", name)
			}
		}
		if len(failed) > 0 {
			t.Errorf("%d of %d cases failed: %s", len(failed), len(results), strings.Join(failed, "; "))
		}
	})

	t.Run("webgpu adapter", func(t *testing.T) {
		t.Logf("adapter %q, gpu info %+v, JSPI %v, %d imports", info.Adapter, info.Info, info.JSPI, len(info.Imports))
		if info.Info.Backend != "webgpu" || info.Info.Adapter == "" || info.Info.Adapter != info.Adapter {
			t.Errorf("gpu info %+v: want the WebGPU adapter %q", info.Info, info.Adapter)
		}
		l := info.Info.Limits
		if l.MaxBufferSize < 256<<20 || l.MaxStorageBufferBindingSize < 128<<20 || l.MaxComputeWorkgroupsPerDimension == 0 {
			t.Errorf("limits %+v below WebGPU's defaults", l)
		}
		if !info.JSPI {
			t.Errorf("Chromium 156 has JSPI, the page found none: ls_probe could not reach read_buffer")
		}
		// Headless Chromium's adapter here is SwiftShader: the engine
		// takes its kernels for software adapters only if it knows.
		if strings.Contains(strings.ToLower(info.Adapter), "swiftshader") && !info.Info.Software {
			t.Errorf("adapter %q: gpu info says Software false", info.Adapter)
		}
		// Its subgroups hold 4 invocations (shared/DESIGN.md), fewer than
		// a matmul row's 8 lanes: the engine must not take its subgroup
		// kernels, so the page must say so.
		if info.Info.Subgroups != (info.Info.SubgroupMinSize > 0) ||
			strings.Contains(strings.ToLower(info.Adapter), "swiftshader") && info.Info.SubgroupMinSize != 4 {
			t.Errorf("adapter %q: subgroups %v, min size %d; SwiftShader's are 4", info.Adapter, info.Info.Subgroups, info.Info.SubgroupMinSize)
		}
	})

	runs := Eval[[]browserRun](b, `window.identical.runs`)
	ctx := context.Background()
	mod := Wazero(t, site)
	var dev gpu.Device
	devErr := errors.New("not opened")
	for _, device := range []string{"gpu", "cpu"} {
		name := map[string]string{"gpu": "webgpu logits match wazero", "cpu": "cpu logits match wazero bit for bit"}[device]
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, run := range runs {
				if run.Device != device {
					continue
				}
				n++
				t.Run(run.Name, func(t *testing.T) {
					var ref gpu.Device // nil: engine.wasm's CPU path under wazero
					tol := 0.0         // the CPU path is the same wasm code in V8 and wazero, IEEE float32 on both
					if device == "gpu" {
						if dev == nil && devErr != nil {
							dev, devErr = native.Open() // closed after every run
						}
						if devErr != nil {
							prereq.Missing(t, prereq.Vulkan, "no native WebGPU for the wazero reference: "+devErr.Error())
						}
						ref, tol = dev, relTol
					}
					var req abi.Request
					if err := json.Unmarshal(run.Request, &req); err != nil {
						t.Fatalf("request %s: %v", run.Request, err)
					}
					e, err := mod.Open(ctx, ref, tiny, "f32", 64)
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close(ctx)
					want, res, err := e.Run(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("browser %s %s: first row %.0f ms, %d rows in %.0f ms", device, run.Name,
						run.FirstRowMS, len(run.Rows)/max(run.Width, 1), run.MS)
					compareRows(t, run, want, res, tol)
				})
			}
			if n == 0 {
				t.Errorf("the page has no %s runs (its bridge case failed)", device)
			}
		})
	}
	if dev != nil {
		dev.Close()
	}
}

// TestBridgeWithoutWebGPU runs abitest.html?nowebgpu in a Chromium without
// --enable-unsafe-webgpu (navigator.gpu has no adapter there): device "gpu"
// fails naming why, "auto" falls back to engine.wasm's CPU path.
func TestBridgeWithoutWebGPU(t *testing.T) {
	site := StartSite(t)
	b := NewBrowser(t, chromedp.Flag("enable-unsafe-webgpu", false))
	if state := b.Open(site.URL+"/static/abitest.html?nowebgpu", 3*time.Minute); state != "done" {
		b.Screenshot("nowebgpu")
		msg, _ := EvalErr[string](b, `String(window.abiError)`)
		t.Fatalf("the page could not run its cases: %s", msg)
	}
	results := Eval[[]abiResult](b, `window.abiResults`)
	if len(results) == 0 {
		t.Fatal("the page ran no cases")
	}
	for _, r := range results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Message)
		} else {
			t.Logf("ok %s (%.0f ms) %s", r.Name, r.MS, r.Message)
		}
	}
}

// compareRows checks tokens and logits of a browser run against wazero's;
// tol is relative to each row's largest |logit| (0: bit-identical).
func compareRows(t *testing.T, got browserRun, want [][]float32, res abi.Result, tol float64) {
	t.Helper()
	if !slices.Equal(got.Output, res.Output) || got.Stopped != res.Stopped || !slices.Equal(got.Targets, res.Targets) {
		t.Errorf("tokens %v (stopped %v, targets %v), wazero %v (stopped %v, targets %v)",
			got.Output, got.Stopped, got.Targets, res.Output, res.Stopped, res.Targets)
	}
	if got.Width == 0 || len(got.Rows) != len(want)*got.Width {
		t.Fatalf("%d values in rows of %d, wazero %d rows", len(got.Rows), got.Width, len(want))
	}
	worstAbs, worstRel := 0.0, 0.0
	worstRow, worstCol := 0, 0
	differ := 0
	for i, row := range want {
		if len(row) != got.Width {
			t.Fatalf("row %d: wazero has %d values, the browser %d", i, len(row), got.Width)
		}
		scale := 0.0
		for _, v := range row {
			scale = math.Max(scale, math.Abs(float64(v)))
		}
		for j, v := range row {
			g := got.Rows[i*got.Width+j]
			if math.Float32bits(g) != math.Float32bits(v) {
				differ++
			}
			d := math.Abs(float64(g) - float64(v))
			if d > worstAbs || math.IsNaN(d) {
				worstAbs, worstRow, worstCol = d, i, j
			}
			if scale > 0 {
				worstRel = math.Max(worstRel, d/scale)
			}
		}
	}
	t.Logf("%d rows × %d: %d logits differ in their bits; max abs diff %.3g (row %d [%d]), max diff / row max |logit| %.3g (tolerance %g)",
		len(want), got.Width, differ, worstAbs, worstRow, worstCol, worstRel, tol)
	if tol == 0 && differ > 0 || worstRel > tol || math.IsNaN(worstAbs) {
		t.Errorf("logits differ beyond the tolerance %g: max abs diff %.3g at row %d [%d] (browser %v, wazero %v)",
			tol, worstAbs, worstRow, worstCol, got.Rows[worstRow*got.Width+worstCol], want[worstRow][worstCol])
	}
}
