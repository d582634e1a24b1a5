package main

// Which files of a model folder from the user's disk the page reads. Pure
// Go (no syscall/js), so it is tested natively.

import (
	"path"
	"strings"
)

// modelFile says whether rel, a path inside a model folder, is one the
// server would serve of a model directory (serve's modelFileKind: the
// top-level JSON, safetensors, GGUF and text files, each variant's
// manifest and shards, and a hub checkpoint's JSON, safetensors and text
// files under hub/DIR; hidden names never, as serve's openUnder refuses
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
		switch segs[0] {
		case "variants":
			return segs[2] == "manifest.json" || ext == ".bin"
		case "hub":
			return ext != ".gguf" && modelFile(segs[2])
		}
	}
	return false
}
