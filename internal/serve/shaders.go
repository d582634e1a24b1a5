package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"logitscope/shaders"
)

// shaderSet is the engine's WGSL as /shaders/ serves it, for reading and
// debugging in the browser (engine.wasm carries its own copy).
type shaderSet struct {
	byName map[string]*shaderFile
	list   []ShaderInfo
}

type shaderFile struct {
	src  string
	etag string
}

// ShaderInfo is one entry of the /shaders/ list.
type ShaderInfo struct {
	Name   string `json:"name"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

// shaderSources names what package shaders exports. It embeds each .wgsl
// file as an unexported string, not as an embed.FS, and exports the
// weight-decoding kernels (matmul, embed) only as the engine compiles
// them: with the FORMAT constant and weights.wgsl's decoders prepended.
// So those are served per format ("matmul-q4.wgsl"), exactly the source
// the engine hands to the GPU, and the others as their files. The matmul
// is served at the default workgroup size; on a real GPU the engine may
// choose another (shaders.MatmulVariant.Workgroup: only the WG constant
// differs).
func shaderSources() map[string]string {
	src := map[string]string{
		"attention.wgsl":   shaders.Attention(),
		"elementwise.wgsl": shaders.Elementwise(),
		"rmsnorm.wgsl":     shaders.RMSNorm(),
		"rope.wgsl":        shaders.RoPE(),
	}
	for f := shaders.F32; f <= shaders.Q6_K; f++ {
		for _, v := range shaders.MatmulVariants {
			src[v.Name(f)+".wgsl"] = shaders.Matmul(f, v)
		}
		src["embed-"+f.String()+".wgsl"] = shaders.Embed(f)
	}
	return src
}

// engineShaders hashes the sources once per process; they never change.
var engineShaders = sync.OnceValue(func() *shaderSet {
	set := &shaderSet{byName: map[string]*shaderFile{}, list: []ShaderInfo{}}
	for name, src := range shaderSources() {
		sum := sha256.Sum256([]byte(src))
		hexSum := hex.EncodeToString(sum[:])
		set.byName[name] = &shaderFile{src: src, etag: sha256ETag(hexSum)}
		set.list = append(set.list, ShaderInfo{Name: name, Size: len(src), SHA256: hexSum})
	}
	sort.Slice(set.list, func(i, j int) bool { return set.list[i].Name < set.list[j].Name })
	return set
})

func (s *Server) serveShaderList(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, "no-cache", s.kernels.list)
}

// serveShader serves a kernel by its exact name; a lookup in a fixed map
// leaves no path for a traversal to walk.
func (s *Server) serveShader(w http.ResponseWriter, r *http.Request, name string) {
	sf := s.kernels.byName[name]
	if sf == nil {
		s.notFound(w, r, errors.New("no shader "+name))
		return
	}
	// Revalidated, not immutable: the URL names the kernel, not its bytes.
	s.serveContent(w, r, name, time.Time{}, strings.NewReader(sf.src), int64(len(sf.src)), sf.etag, textDoc)
}
