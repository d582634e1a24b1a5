package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/gpu/native/nativetest"
)

// The GPU capture of every variant decodes the same tokens as the CPU
// capture, with logits within the engine's documented tolerance.
func TestCaptureDeviceGPU(t *testing.T) {
	nativetest.Device(t)
	dir := quantized(t)
	out := t.TempDir()
	ids := regexp.MustCompile(`output_ids: .*`)
	for _, v := range []string{"f32", "q8", "q6", "q4"} {
		var got [2]string
		var dumps [2]*dump.Logits
		for i, device := range []string{"cpu", "gpu"} {
			path := filepath.Join(out, v+"-"+device+".dump")
			s, err := run(t, captureCmd, "--model", dir, "--variant", v, "--device", device, "--max-new", "6", "--dump-logits", path, "Hello")
			if err != nil {
				t.Fatal(err)
			}
			got[i] = ids.FindString(s)
			if dumps[i], err = dump.ReadFile(path); err != nil {
				t.Fatal(err)
			}
		}
		if got[0] != got[1] || got[0] == "" {
			t.Fatalf("%s: cpu %s, gpu %s", v, got[0], got[1])
		}
		var worst float64
		for i := range dumps[0].Data {
			worst = max(worst, math.Abs(float64(dumps[0].Data[i]-dumps[1].Data[i])))
		}
		t.Logf("%s: %s on both; max |gpu − cpu| %.2e", v, got[0], worst)
		if worst > 1e-3 {
			t.Fatalf("%s: logits differ by %g", v, worst)
		}
	}
	_, err := run(t, captureCmd, "--model", dir, "--device", "tpu", "--dump-logits", filepath.Join(out, "x.dump"), "Hi")
	if err == nil || !strings.Contains(err.Error(), `--device "tpu"`) {
		t.Fatalf("err = %v", err)
	}
}

// Without a Vulkan driver, --device gpu says what to install and --device
// auto falls back to the CPU. Run in a child process, since the Vulkan
// loader reads its driver list once per process.
func TestCaptureNoAdapter(t *testing.T) {
	if args := os.Getenv("LOGITSCOPE_CHILD_CAPTURE"); args != "" {
		err := captureCommand(strings.Split(args, "\x1f"), os.Stdout, os.Stdout)
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
		}
		os.Exit(0)
	}
	dir := tiny(t)
	for _, c := range []struct{ device, want string }{
		{"gpu", "error: gpu/native: no WebGPU adapter: install Mesa's Vulkan drivers (apt-get install mesa-vulkan-drivers libvulkan1) or use --device cpu"},
		{"auto", "device: cpu (gpu/native: no WebGPU adapter"},
	} {
		args := strings.Join([]string{"--model", dir, "--device", c.device, "--max-new", "2",
			"--dump-logits", filepath.Join(t.TempDir(), "x.dump"), "Hi"}, "\x1f")
		cmd := exec.Command(os.Args[0], "-test.run=^TestCaptureNoAdapter$")
		cmd.Env = append(os.Environ(), "LOGITSCOPE_CHILD_CAPTURE="+args,
			"VK_ICD_FILENAMES=/nonexistent", "VK_DRIVER_FILES=/nonexistent")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("--device %s without a driver:\n%s\nwant %q", c.device, out, c.want)
		}
		if c.device == "auto" && !strings.Contains(string(out), "logit_rows_dumped: 2 rows") {
			t.Errorf("--device auto did not fall back to the CPU:\n%q", out)
		}
	}
}

// variantsOf names the variants the runtime tests capture by a label for
// file names: f32, q4, and q4 exported as a GGUF file inside the model
// directory (which engine.wasm opens as it is).
func variantsOf(t *testing.T, dir string) [][2]string {
	return [][2]string{{"f32", "f32"}, {"q4", "q4"}, {"gguf", ggufmodeltest.Export(t, dir, "q4", "tiny-q4.gguf")}}
}

// capture --runtime wasm runs engine.wasm under wazero: its dumps are
// byte-identical to the native Go engine's on the same GPU, greedy and
// panel and forced (--follow; 40 outputs make the fed sequence span
// several chunks), f32, q4 and a GGUF.
func TestCaptureRuntimeWasm(t *testing.T) {
	nativetest.Device(t)
	wasm := filepath.Join(t.TempDir(), "engine.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", wasm, "../../wasm")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building engine.wasm: %v\n%s", err, out)
	}
	dir := quantized(t)
	out := t.TempDir()
	panel := panelFile(t)
	for _, lv := range variantsOf(t, dir) {
		label, v := lv[0], lv[1]
		ref := filepath.Join(out, label+"-ref.dump")
		if _, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--max-new", "40", "--stop", "9999", "--dump-logits", ref, "Hi"); err != nil {
			t.Fatal(err)
		}
		for _, mode := range [][]string{{"--max-new", "5", "Hello"}, {"--panel", panel, "--window", "48"}, {"--follow", ref}} {
			var sums [2]string
			for i, rt := range []string{"native", "wasm"} {
				path := filepath.Join(out, label+rt+".dump")
				args := append([]string{"--model", dir, "--variant", v, "--device", "gpu", "--runtime", rt, "--engine", wasmOnly(rt, wasm), "--force", "--dump-logits", path}, mode...)
				if _, err := run(t, captureCmd, args...); err != nil {
					t.Fatalf("%s %v: %v", rt, mode, err)
				}
				sums[i] = fileSHA(t, path)
			}
			if sums[0] != sums[1] {
				t.Fatalf("%s %v: the wasm dump differs from the native one", label, mode)
			}
			checkWasmReceipt(t, filepath.Join(out, label+"wasm.dump"), v, "wasm+gpu: ")
		}
	}
	_, err := run(t, captureCmd, "--model", dir, "--runtime", "wasm", "--engine", filepath.Join(out, "none.wasm"), "--dump-logits", filepath.Join(out, "x.dump"), "Hi")
	if err == nil || !strings.Contains(err.Error(), "make wasm") {
		t.Fatalf("missing engine: %v", err)
	}
}

// capture --runtime wasm --device cpu runs engine.wasm on its own CPU path
// (a browser without WebGPU): its dumps are byte-identical to the native
// CPU engine's, greedy and panel and forced, f32 and q4. No GPU needed.
func TestCaptureRuntimeWasmCPU(t *testing.T) {
	wasm := engineWasm(t)
	dir := quantized(t)
	out := t.TempDir()
	panel := panelFile(t)
	for _, lv := range variantsOf(t, dir) {
		label, v := lv[0], lv[1]
		ref := filepath.Join(out, label+"-ref.dump")
		if _, err := run(t, captureCmd, "--model", dir, "--variant", v, "--device", "cpu", "--runtime", "native", "--max-new", "40", "--stop", "9999", "--dump-logits", ref, "Hi"); err != nil {
			t.Fatal(err)
		}
		for _, mode := range [][]string{{"--max-new", "5", "Hello"}, {"--panel", panel, "--window", "48"}, {"--follow", ref}} {
			var sums [2]string
			for i, rt := range []string{"native", "wasm"} {
				path := filepath.Join(out, label+rt+".dump")
				args := append([]string{"--model", dir, "--variant", v, "--device", "cpu", "--runtime", rt, "--engine", wasmOnly(rt, wasm), "--force", "--dump-logits", path}, mode...)
				if _, err := run(t, captureCmd, args...); err != nil {
					t.Fatalf("%s %v: %v", rt, mode, err)
				}
				sums[i] = fileSHA(t, path)
			}
			if sums[0] != sums[1] {
				t.Fatalf("%s %v: the wasm CPU dump differs from the native CPU one", label, mode)
			}
			checkWasmReceipt(t, filepath.Join(out, label+"wasm.dump"), v, "wasm+cpu")
		}
	}
}

// checkWasmReceipt checks that a wasm capture's receipt names its device
// (starting with device) and, for a GGUF variant, the file's sha256.
func checkWasmReceipt(t *testing.T, dumpPath, variant, device string) {
	t.Helper()
	rc, err := receipt.Read(receipt.Path(dumpPath))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rc.Device, device) {
		t.Fatalf("%s: receipt device %q, want %s…", dumpPath, rc.Device, device)
	}
	if !strings.HasSuffix(variant, ".gguf") {
		return
	}
	if rc.GGUF == nil || rc.GGUF.SHA256 != fileSHA(t, variant) || rc.Variant != filepath.Base(variant) {
		t.Fatalf("%s: receipt variant %q, GGUF %+v; want %s and its sha256", dumpPath, rc.Variant, rc.GGUF, filepath.Base(variant))
	}
}

// --activations q8 runs the products with llama.cpp's 8-bit activations,
// on the CPU and on the GPU: each receipt says so, the logits move by the
// activations' rounding, both devices agree within the engine's
// tolerance, and engine.wasm refuses it by name.
func TestCaptureActivationsQ8(t *testing.T) {
	nativetest.Device(t)
	dir := quantized(t)
	out := t.TempDir()
	var dumps [3]*dump.Logits
	for i, c := range [][2]string{{"f32", "cpu"}, {"q8", "cpu"}, {"q8", "gpu"}} {
		acts, device := c[0], c[1]
		path := filepath.Join(out, acts+"-"+device+".dump")
		if _, err := run(t, captureCmd, "--model", dir, "--variant", "q4", "--activations", acts, "--device", device, "--max-new", "4", "--dump-logits", path, "Hello"); err != nil {
			t.Fatal(err)
		}
		var err error
		if dumps[i], err = dump.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		r, err := receipt.Read(receipt.Path(path))
		if err != nil {
			t.Fatal(err)
		}
		// "cpu" or "gpu: <adapter> (vulkan)", then ", activations q8" for q8 only.
		suffix := map[string]string{"f32": "", "q8": ", activations q8"}[acts]
		name, ok := strings.CutSuffix(r.Device, suffix)
		if ok = ok && !strings.Contains(name, "activations") && (name == "cpu" && device == "cpu" || strings.HasPrefix(name, "gpu: ") && device == "gpu"); !ok {
			t.Errorf("--activations %s --device %s: receipt device %q", acts, device, r.Device)
		}
	}
	// firstRow is how far dumps i and j's first rows are apart, and the
	// largest |logit| of i's.
	firstRow := func(i, j int) (worst, top float64) {
		for k := range dumps[i].Data[:dumps[i].Vocab] {
			worst = max(worst, math.Abs(float64(dumps[i].Data[k]-dumps[j].Data[k])))
			top = max(top, math.Abs(float64(dumps[i].Data[k])))
		}
		return worst, top
	}
	if moved, _ := firstRow(0, 1); moved == 0 || moved > 0.5 {
		t.Errorf("first row: 8-bit activations move the logits by %g, want a small nonzero change", moved)
	}
	// engine's A8Tolerance: past the first position, a bit apart in the
	// ops between products can move a rounding a code.
	if apart, top := firstRow(1, 2); apart > 0.1*top {
		t.Errorf("first row with 8-bit activations: the GPU is %g from the CPU (largest logit %g)", apart, top)
	}
	_, err := run(t, captureCmd, "--model", dir, "--variant", "q4", "--activations", "q8", "--runtime", "wasm", "--dump-logits", filepath.Join(out, "x.dump"), "Hi")
	if want := "runs in the native engine only"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--activations q8 --runtime wasm: err = %v, want %q", err, want)
	}
}
