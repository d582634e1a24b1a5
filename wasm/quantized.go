package main

import (
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
