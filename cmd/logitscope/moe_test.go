package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
	"logitscope/internal/model/synth"
)

// moeModel writes tiny-qwen3-moe (seed 0) with its q4 variant.
func moeModel(t *testing.T) string { return moeModelOf(t, "tiny-qwen3-moe") }

// moeModelOf writes preset (seed 0) with its q4 variant.
func moeModelOf(t *testing.T, preset string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), preset)
	if err := synth.Write(synth.Presets[preset], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, quantizeCmd, "--model", dir, "--scheme", "q4"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// routingOut is what a test reads of report --json.
type routingOut struct {
	Notes   []string `json:"notes"`
	Summary struct {
		Positions int `json:"positions"`
		Flips     int `json:"flips"`
	} `json:"summary"`
	Routing *routing.Report `json:"routing"`
}

// countRoutes counts, straight from two dumps' routes tensors, the
// positions where some layer's expert set differs, those where only an
// order does, and the experts swapped: what report must say.
func countRoutes(t *testing.T, refPath, testPath string) (set, order, swapped int, changed []int) {
	t.Helper()
	a, _, err := dump.ReadAny(refPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := dump.ReadAny(testPath)
	if err != nil {
		t.Fatal(err)
	}
	if a.Routes == nil || b.Routes == nil || a.Routes.Rows != a.Rows {
		t.Fatalf("routes missing from the dumps: %v %v", a.Routes, b.Routes)
	}
	for i := range a.Rows {
		s, o := false, false
		for j := range a.Routes.Layers {
			x, y := a.Routes.At(i, j), b.Routes.At(i, j)
			sx, sy := slices.Sorted(slices.Values(x)), slices.Sorted(slices.Values(y))
			switch {
			case !slices.Equal(sx, sy):
				s = true
				for _, e := range y {
					if !slices.Contains(x, e) {
						swapped++
					}
				}
			case !slices.Equal(x, y):
				o = true
			}
		}
		switch {
		case s:
			set++
			changed = append(changed, i)
		case o:
			order++
		}
	}
	return set, order, swapped, changed
}

// capture and report on tiny-qwen3-moe: the safetensors dumps keep the
// routes, q4 routes some positions to other experts than f32, and the
// report's counts are the ones the dumps hold, teacher-forced on a panel
// and following a greedy reference alike.
func TestReportRouting(t *testing.T) {
	dir := moeModel(t)
	out := t.TempDir()
	panel := panelFile(t)
	ref := filepath.Join(out, "greedy.safetensors")
	got, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--max-new", "24", "--dump-logits", ref, "What is the capital of France?")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "routes_dumped: 24 rows x 2 sparse layers x top-2 of 8 experts -> "+ref+"\n") {
		t.Fatalf("capture output:\n%s", got)
	}
	pairs := map[string][2][]string{
		"follow": {nil, {"--variant", "q4", "--follow", ref}},
		"panel":  {{"--panel", panel, "--window", "64"}, {"--variant", "q4", "--panel", panel, "--window", "64"}},
	}
	for name, args := range pairs {
		t.Run(name, func(t *testing.T) {
			a, b := ref, filepath.Join(out, name+"-q4.safetensors")
			if args[0] != nil {
				a = filepath.Join(out, name+"-f32.safetensors")
				if _, err := run(t, captureCmd, append([]string{"--model", dir, "--device", "cpu", "--dump-logits", a}, args[0]...)...); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := run(t, captureCmd, append([]string{"--model", dir, "--device", "cpu", "--dump-logits", b}, args[1]...)...); err != nil {
				t.Fatal(err)
			}
			js, err := run(t, reportCmd, "--ref", a, "--test", b, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var r routingOut
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatal(err)
			}
			rt := r.Routing
			if rt == nil {
				t.Fatal("the report has no routing")
			}
			set, order, swapped, changed := countRoutes(t, a, b)
			s := rt.Summary
			t.Logf("%d positions: %d with another expert set, %d reordered only, %d of %d choices swapped; %d flips, %d of them at a set change",
				s.Positions, s.SetChanged, s.OrderOnly, s.Swapped, s.Slots, s.Flips, s.FlipsAtSetChange)
			if set == 0 {
				t.Fatal("q4 changed no expert set on tiny-qwen3-moe")
			}
			if s.SetChanged != set || s.OrderOnly != order || s.Swapped != swapped || s.Positions != r.Summary.Positions ||
				s.Slots != s.Positions*2*2 || s.Flips != r.Summary.Flips || s.FirstSetChange != changed[0] {
				t.Fatalf("report summary %+v; the dumps say %d set, %d order only, %d swapped, first %d", s, set, order, swapped, changed[0])
			}
			var flagged []int
			for i, p := range rt.Positions {
				if p.Change == routing.Set {
					flagged = append(flagged, i)
				}
			}
			if !reflect.DeepEqual(flagged, changed) {
				t.Fatalf("positions flagged %v, the dumps differ at %v", flagged, changed)
			}
			if !reflect.DeepEqual(rt.Layout, routing.Layout{Layers: []int{0, 1}, TopK: 2, Experts: 8}) {
				t.Fatalf("layout %+v", rt.Layout)
			}
			text, err := run(t, reportCmd, "--ref", a, "--test", b)
			if err != nil {
				t.Fatal(err)
			}
			if want := "====== Expert routing: " + itoa(set) + " of " + itoa(s.Positions) + " positions routed to another set"; !strings.Contains(text, want) {
				t.Fatalf("text report lacks %q:\n%s", want, text)
			}
		})
	}

	// A binary dump has no room for routes: capture says so, and report
	// says it cannot compare them.
	bin := filepath.Join(out, "q4.dump")
	var stdout, stderr bytes.Buffer
	if err := captureCommand([]string{"--model", dir, "--device", "cpu", "--variant", "q4", "--follow", ref, "--dump-logits", bin}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "note: "+bin+" is a binary dump, which has no room for the experts each row was routed to (layers 0,1: top-2 of 8 experts)") ||
		strings.Contains(stdout.String(), "routes_dumped") {
		t.Fatalf("capture to a binary dump:\n%s%s", stdout.String(), stderr.String())
	}
	js, err := run(t, reportCmd, "--ref", ref, "--test", bin, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r routingOut
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	if r.Routing != nil || !slices.Contains(r.Notes, ref+" carries expert routes and "+bin+" none: routing is not compared") {
		t.Fatalf("notes %q, routing %v", r.Notes, r.Routing)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// engine.wasm's CPU path splits rows as the native engine does: its
// safetensors dumps of a mixture of experts, greedy (the guest picks each
// token from the logits alone), panel and forced, are byte-identical to
// the native CPU engine's, routes included; for Qwen3-MoE's softmax
// router and GLM-4.5's grouped sigmoid one.
func TestCaptureRuntimeWasmCPUMoE(t *testing.T) {
	for _, preset := range []string{"tiny-qwen3-moe", "tiny-glm4-moe"} {
		t.Run(preset, func(t *testing.T) { captureWasmCPUMoE(t, preset) })
	}
}

func captureWasmCPUMoE(t *testing.T, preset string) {
	wasm := engineWasm(t)
	dir := moeModelOf(t, preset)
	out := t.TempDir()
	panel := panelFile(t)
	ref := filepath.Join(out, "ref.safetensors")
	if _, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--runtime", "native", "--max-new", "12", "--dump-logits", ref, "Hi"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"f32", "q4"} {
		for _, mode := range [][]string{{"--max-new", "5", "Hello"}, {"--panel", panel, "--window", "48"}, {"--follow", ref}} {
			var sums [2]string
			for i, rt := range []string{"native", "wasm"} {
				path := filepath.Join(out, v+rt+".safetensors")
				args := append([]string{"--model", dir, "--variant", v, "--device", "cpu", "--runtime", rt, "--engine", wasmOnly(rt, wasm), "--force", "--dump-logits", path}, mode...)
				if _, err := run(t, captureCmd, args...); err != nil {
					t.Fatalf("%s %v: %v", rt, mode, err)
				}
				if l, _, err := dump.ReadAny(path); err != nil || l.Routes == nil {
					t.Fatalf("%s %v: %v, routes %v", rt, mode, err, l)
				}
				sums[i] = fileSHA(t, path)
			}
			if sums[0] != sums[1] {
				t.Fatalf("%s %v: the wasm CPU dump differs from the native CPU one", v, mode)
			}
		}
	}
}
