package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"logitscope/shaders"
)

func TestShaders(t *testing.T) {
	f := newFixture(t)
	w := f.do(t, "/shaders/", nil)
	var list []ShaderInfo
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != 200 {
		t.Fatalf("/shaders/: %d %v", w.Code, err)
	}
	names := map[string]ShaderInfo{}
	for i, sh := range list {
		names[sh.Name] = sh
		if i > 0 && list[i-1].Name >= sh.Name {
			t.Errorf("not sorted: %s before %s", list[i-1].Name, sh.Name)
		}
	}
	tests := []struct{ name, src string }{
		{"rmsnorm.wgsl", shaders.RMSNorm()},
		{"rope.wgsl", shaders.RoPE()},
		{"attention.wgsl", shaders.Attention()},
		{"elementwise.wgsl", shaders.Elementwise()},
		{"matmul-f32.wgsl", shaders.Matmul(shaders.F32, shaders.MatmulVariant{})},
		{"matmul-q4.wgsl", shaders.Matmul(shaders.Q4, shaders.MatmulVariant{})},
		{"embed-bf16.wgsl", shaders.Embed(shaders.BF16)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(t, "/shaders/"+tc.name, nil)
			sum := sha256.Sum256([]byte(tc.src))
			h := w.Header()
			if w.Code != 200 || w.Body.String() != tc.src {
				t.Fatalf("status %d, body is not the kernel", w.Code)
			}
			if h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Cache-Control") != "no-cache" ||
				h.Get("ETag") != `"sha256-`+hex.EncodeToString(sum[:])+`"` {
				t.Errorf("headers %v", h)
			}
			if sh := names[tc.name]; sh.SHA256 != hex.EncodeToString(sum[:]) || sh.Size != len(tc.src) {
				t.Errorf("listed as %+v", sh)
			}
			if c := f.do(t, "/shaders/"+tc.name, map[string]string{"If-None-Match": h.Get("ETag")}).Code; c != 304 {
				t.Errorf("revalidation: %d", c)
			}
			if got := gunzip(t, f.do(t, "/shaders/"+tc.name, map[string]string{"Accept-Encoding": "gzip"})); string(got) != tc.src {
				t.Errorf("gzip body differs")
			}
		})
	}
	// Every listed name is served, and only those (the traversal table
	// tries the others).
	for name := range names {
		if c := f.do(t, "/shaders/"+name, nil).Code; c != 200 || !strings.HasSuffix(name, ".wgsl") {
			t.Errorf("%s: %d", name, c)
		}
	}
	if len(names) != 4+(1+len(shaders.MatmulVariants))*int(shaders.Q6_K+1) {
		t.Errorf("%d shaders listed", len(names))
	}
}
