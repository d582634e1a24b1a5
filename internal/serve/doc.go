// Package serve is logitscope's HTTP layer. It serves
//
//   - GET /models/: the models, each with its verified variants (quantized
//     variant directories, the GGUF files beside config.json that were
//     converted from that checkpoint, with their ggml type mix, and the
//     checkpoints under hub/ that a hub tool's format quantized from it,
//     with their format and fingerprint) and every file the page may fetch
//     (path, size, sha256, sorted by path);
//   - GET /models/<name>/<path>: those files (checkpoint JSON, safetensors,
//     GGUF files, variant manifests and shards, hub checkpoints' files) with HTTP ranges, strong
//     sha256 ETags, immutable caching for weights and gzip for JSON;
//   - POST /api/runs, GET /api/runs/<id>, GET /r/<id>: shared runs, snapshot
//     documents (checked with snapshot.Parse) stored by content hash under
//     Options.Data/runs, and the page that reopens one;
//   - GET /shaders/ and /shaders/<name>.wgsl: the engine's WGSL kernels;
//   - GET /, /static/<file>: the page (Options.Static), .wasm as
//     application/wasm.
//
// It never serves a byte from outside a model, page or runs directory:
// paths are checked strictly rather than cleaned, symlinks are resolved and
// must stay inside, and every refusal is a plain 404 whose reason goes to
// the log only. POST is accepted on /api/runs alone, GET and HEAD
// everywhere else.
package serve
