package main

import (
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model"
)

// openQuantized is the hub quantization (GPTQ, AWQ, compressed-tensors,
// MLX, bitsandbytes) that the checkpoint ck holds, for
// engine.Options.Quantized, or nil where ck holds none: ls_open then runs
// the checkpoint, a variant or a GGUF file as before. The one place where
// engine.wasm learns of the hub readers: until they are wired here (the
// reader of a checkpoint directory whose config.json has a
// quantization_config), every checkpoint holds none.
var openQuantized = func(ck *checkpoint.Checkpoint) (model.Quantized, error) { return nil, nil }
