// Package serve is logitscope's HTTP layer: it lists models and serves
// their files (checkpoint JSON, safetensors, variant manifests and shards)
// to the browser page with HTTP ranges, strong sha256 ETags and gzip for
// JSON, and it never serves a byte from outside a model directory.
package serve
