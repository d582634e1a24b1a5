package main

import (
	"flag"
	"strings"

	"logitscope/internal/peer/llamacpp"
)

// llamaFlags are the settings of a llama.cpp context for --runtime
// llama.cpp, each one recorded in the receipt: they change its numbers.
func llamaFlags(fs *flag.FlagSet) *llamacpp.SessionOptions {
	o := &llamacpp.SessionOptions{}
	fs.IntVar(&o.Threads, "llama-threads", 0, "with --runtime llama.cpp: n_threads and n_threads_batch (0: llama.cpp's default)")
	fs.IntVar(&o.Batch, "llama-batch", 0, "with --runtime llama.cpp: n_batch, the tokens of one llama_decode (0: 512)")
	fs.IntVar(&o.UBatch, "llama-ubatch", 0, "with --runtime llama.cpp: n_ubatch, the tokens of one graph (0: the batch)")
	fs.StringVar(&o.FlashAttn, "llama-flash-attn", "", "with --runtime llama.cpp: flash attention, "+strings.Join(llamacpp.FlashAttn, ", ")+" (default auto)")
	fs.StringVar(&o.TypeK, "llama-type-k", "", "with --runtime llama.cpp: the KV cache's K type, "+strings.Join(llamacpp.KVTypes, ", ")+" (default f16)")
	fs.StringVar(&o.TypeV, "llama-type-v", "", "with --runtime llama.cpp: the KV cache's V type (default f16)")
	return o
}
