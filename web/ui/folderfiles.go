package main

// Which files of a model folder from the user's disk the page reads. Pure
// Go (no syscall/js), so it is tested natively.

import (
	"path"
	"strings"
)

// modelFile says whether rel, a path inside a model folder, is one the
// server would serve of a model directory (serve's modelFileKind: the
// top-level JSON, safetensors, GGUF and text files, and each variant's
// manifest and shards; hidden names never, as serve's openUnder refuses
// them). A folder from this computer runs exactly as a served model:
// the worker gets these files and nothing else of the folder (a README,
// a PyTorch checkpoint, a git or cache directory beside them).
func modelFile(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, s := range segs {
		if s == "" || s[0] == '.' {
			return false
		}
	}
	ext := strings.ToLower(path.Ext(rel))
	switch len(segs) {
	case 1:
		return ext == ".json" || ext == ".safetensors" || ext == ".gguf" || ext == ".txt"
	case 3:
		return segs[0] == "variants" && (segs[2] == "manifest.json" || ext == ".bin")
	}
	return false
}
