package main

import (
	"path"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model"
	"logitscope/internal/model/hubquant"
)

// openQuantized is the hub quantization (GPTQ, AWQ, compressed-tensors,
// MLX, bitsandbytes) that the checkpoint ck holds, for
// engine.Options.Quantized, or nil where ck holds none (its config.json
// has no quantization_config): ls_open then runs the checkpoint, a
// variant or a GGUF file as before.
func openQuantized(ck *checkpoint.Checkpoint) (model.Quantized, error) {
	if !hubquant.Is(ck.Dir) {
		return nil, nil
	}
	q, err := hubquant.FromCheckpoint(ck)
	if err == nil {
		// The weights carry the quantization now: the config's geometry
		// is the float model's (model.GeometryOf refuses a config that
		// names one, lest its float tensors be taken for the weights).
		ck.Config.QuantizationConfig = nil
	}
	return q, err
}

// isHub says whether an ls_open variant names a hub checkpoint of the
// model: hub/DIR, one directory under the model's hub/ (where quantize
// --format writes them and the server lists them). The guest sees nothing
// outside the model's mount.
func isHub(v string) bool {
	dir, ok := strings.CutPrefix(v, "hub/")
	return ok && dir != "" && path.Base(dir) == dir && dir != ".." && dir != "."
}
