package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/dump"
	"logitscope/gpu/native"
)

// The GPU capture of every variant decodes the same tokens as the CPU
// capture, with logits within the engine's documented tolerance.
func TestCaptureDeviceGPU(t *testing.T) {
	if dev, err := native.Open(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	} else {
		dev.Close()
	}
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
