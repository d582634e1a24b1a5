package serve

import (
	"errors"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/onnxmodel"
)

// ONNXDir is where a model directory keeps its ONNX exports (logitscope
// export --onnx MODEL/onnx/NAME.onnx): the page runs each through
// onnxruntime-web as a side named "onnx/NAME.onnx".
const ONNXDir = "onnx"

// isONNXFile says whether rel names an export under ONNXDir.
func isONNXFile(rel string) bool {
	dir, name := path.Split(rel)
	return dir == ONNXDir+"/" && strings.EqualFold(path.Ext(name), ".onnx") && name[0] != '.'
}

// loadONNX lists the exports in realDir/onnx that compute this model:
// each one's metadata (onnxmodel.ReadMeta, a few bytes: the weights are
// not read) must name cfg's architecture, vocabulary and geometry, and
// the checkpoint fingerprint fp its variants name ("" when it has none).
// One that does not is left out with a warning, as a GGUF that fails is:
// it would only fail in the page, or worse, compare another model.
func loadONNX(name, realDir string, cfg checkpoint.Config, fp string, warn func(format string, args ...any)) []VariantInfo {
	entries, _ := os.ReadDir(filepath.Join(realDir, ONNXDir))
	var out []VariantInfo
	for _, e := range entries {
		rel := path.Join(ONNXDir, e.Name())
		if !isONNXFile(rel) {
			continue
		}
		f, st, err := openUnder(realDir, rel)
		if err != nil {
			continue // a symlink out of the directory, or not a regular file: not served
		}
		f.Close()
		m, err := onnxmodel.ReadMeta(f.Name())
		if err == nil {
			err = m.Fits(cfg, fp)
		}
		if err != nil {
			warn("serve: model %s: %s skipped: %v", name, rel, err)
			continue
		}
		out = append(out, VariantInfo{Kind: KindONNX, Name: rel, Bytes: st.Size(), MaxLen: m.MaxLen, Scheme: m.Variant})
	}
	return out
}

// ortKind is how an onnxruntime-web file under /ort/ is served: its
// scripts and wasm only (the page's own types), one level deep, as
// onnxruntime-web's dist directory lays them out; anything else there
// (its README, package.json) is not the page's to fetch.
func ortKind(rel string) (kind, bool) {
	switch strings.ToLower(path.Ext(rel)) {
	case ".js", ".mjs", ".wasm":
		if !strings.Contains(rel, "/") {
			return staticKind(rel), true
		}
	}
	return kind{}, false
}

func (s *Server) serveORT(w http.ResponseWriter, r *http.Request, rel string) {
	k, ok := ortKind(rel)
	if !ok {
		s.notFound(w, r, errors.New("not an onnxruntime-web script or wasm"))
		return
	}
	s.serveFile(w, r, s.ort, rel, k)
}
