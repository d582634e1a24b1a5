package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A quantized variant opens without the checkpoint's safetensors, as the
// page mounts a served model for it: the variant holds every tensor and
// its manifest names the checkpoint, so the rows are those of the same
// variant opened beside the weights (where its manifest is checked
// against them). f32 needs the weights and says so.
func TestVariantWithoutWeights(t *testing.T) {
	setup(t)
	ctx := context.Background()
	bare := withoutWeights(t, fixtures.modelDir, "")
	if err := os.CopyFS(filepath.Join(bare, "variants"), os.DirFS(filepath.Join(fixtures.modelDir, "variants"))); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "q4 without the weights", greedy4(t, bare, "q4"), greedy4(t, fixtures.modelDir, "q4"))

	_, err := fixtures.mod.Open(ctx, nil, bare, "f32", 64)
	if err == nil || !strings.Contains(err.Error(), "no safetensors weights") {
		t.Fatalf("f32 without the weights: %v, want the checkpoint's refusal", err)
	}
}

// greedy4 is the rows of 4 greedy steps after testPrompt on the model at
// dir, variant v, on the CPU path.
func greedy4(t *testing.T, dir, v string) [][]float32 {
	t.Helper()
	ctx := context.Background()
	e, err := fixtures.mod.Open(ctx, nil, dir, v, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	rows, _, _, err := e.Greedy(ctx, testPrompt(), 4, []int{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
