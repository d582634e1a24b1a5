package internal_test

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "logitscope/"

// layers are the kinds of package, bottom up, each with the layers it may
// import besides its own: data flows files → model → engine → run →
// logits → analysis → view, and no package reaches back up. Analysis reads
// logits as the formats store them, so it sits beside the engine, not on
// it: a document that spoke the engine's requests would have to travel
// with the engine (snapshot once did).
var layers = []struct {
	name    string
	paths   []string // package path prefixes, relative to the module
	imports []string
}{
	{"sys", []string{"internal/sys/"}, nil},
	{"format", []string{"internal/format/"}, []string{"sys"}},
	{"text", []string{"internal/text/"}, []string{"sys"}},
	{"peer", []string{"internal/peer/"}, []string{"sys", "format"}},
	{"quant", []string{"internal/quant"}, []string{"sys", "format"}},
	{"model", []string{"internal/model", "demo"}, []string{"sys", "format", "text", "quant"}},
	{"gpu", []string{"internal/gpu", "shaders"}, []string{"sys", "format"}},
	{"engine", []string{"internal/engine", "host", "wasm/abi"}, []string{"sys", "format", "text", "peer", "quant", "model", "gpu"}},
	{"analysis", []string{"internal/analysis/"}, []string{"sys", "format", "text"}},
	{"run", []string{"internal/run/"}, []string{"sys", "format", "text", "peer", "quant", "model", "gpu", "engine", "analysis"}},
	{"view", []string{"internal/serve", "cmd/", "wasm", "web/"}, []string{"sys", "format", "text", "peer", "quant", "model", "gpu", "engine", "analysis", "run"}},
}

// layerOf is the layer of a package path (module-relative); the longest
// matching prefix wins, so wasm/abi is the engine's while wasm is a view.
func layerOf(pkg string) (string, bool) {
	best, name := -1, ""
	for _, l := range layers {
		for _, p := range l.paths {
			if (pkg == strings.TrimSuffix(p, "/") || strings.HasPrefix(pkg, strings.TrimSuffix(p, "/")+"/")) && len(p) > best {
				best, name = len(p), l.name
			}
		}
	}
	return name, best >= 0
}

// violations lists the imports of graph (package → its module imports,
// module-relative) that reach a layer the importer may not use, and the
// packages that belong to no layer.
func violations(graph map[string][]string) []string {
	allowed := map[string][]string{}
	for _, l := range layers {
		allowed[l.name] = append([]string{l.name}, l.imports...)
	}
	var bad []string
	for pkg, imports := range graph {
		from, ok := layerOf(pkg)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s belongs to no layer: add its folder to a layer in layers_test.go", pkg))
			continue
		}
		for _, imp := range imports {
			to, ok := layerOf(imp)
			if ok && !slices.Contains(allowed[from], to) {
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): %s may import only %s", pkg, from, imp, to, from, strings.Join(allowed[from], ", ")))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// importGraph is go list's view of the module's packages and their
// imports (not their tests': a package's tests may run it through the
// layers above it), for one GOOS/GOARCH.
func importGraph(t *testing.T, env ...string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,GoFiles,Imports,Error", module+"...")
	cmd.Dir = ".."
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", env, err)
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			GoFiles    []string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil && !strings.Contains(p.Error.Err, "build constraints exclude all Go files") {
			t.Fatalf("go list %v: %s: %s", env, p.ImportPath, p.Error.Err)
		}
		if len(p.GoFiles) == 0 {
			continue // tests alone (this one), or nothing for this target
		}
		var mine []string
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				mine = append(mine, strings.TrimPrefix(imp, module))
			}
		}
		graph[strings.TrimPrefix(p.ImportPath, module)] = mine
	}
	return graph
}

// TestLayers fails when a package imports from a layer above its own, for
// each target the module builds for: native, engine.wasm (wasip1) and the
// page's ui.wasm (js).
func TestLayers(t *testing.T) {
	statSources(t)
	for _, env := range [][]string{nil, {"GOOS=wasip1", "GOARCH=wasm"}, {"GOOS=js", "GOARCH=wasm"}} {
		graph := importGraph(t, env...)
		if len(graph) < 40 {
			t.Fatalf("go list %v found %d packages", env, len(graph))
		}
		for _, v := range violations(graph) {
			t.Errorf("%v: %s", env, v)
		}
	}
}

// statSources stats every Go file of the module, so that go test's cache,
// which sees the files a test opens or stats but not what go list reads,
// reruns TestLayers after an edit.
func statSources(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestViolations(t *testing.T) {
	for _, c := range []struct {
		name  string
		graph map[string][]string
		want  []string
	}{
		{"down and sideways", map[string][]string{
			"internal/run/conform":         {"internal/analysis/margins", "internal/run/capture", "internal/format/dump"},
			"internal/analysis/snapshot":   {"internal/analysis/margins", "internal/format/gguf"},
			"wasm":                         {"wasm/abi", "internal/run/session"},
			"internal/engine/internal/cpu": {"internal/model", "internal/quant"},
		}, nil},
		{"the document speaking the engine's requests", map[string][]string{
			"internal/analysis/snapshot": {"internal/run/session", "wasm/abi"},
		}, []string{
			"internal/analysis/snapshot (analysis) imports internal/run/session (run): analysis may import only analysis, sys, format, text",
			"internal/analysis/snapshot (analysis) imports wasm/abi (engine): analysis may import only analysis, sys, format, text",
		}},
		{"a format's test helper reaching into the engine", map[string][]string{
			"internal/model/ggufmodel/ggufmodeltest": {"internal/engine"},
		}, []string{
			"internal/model/ggufmodel/ggufmodeltest (model) imports internal/engine (engine): model may import only model, sys, format, text, quant",
		}},
		{"a folder of no layer", map[string][]string{"tools/x": nil}, []string{
			"tools/x belongs to no layer: add its folder to a layer in layers_test.go",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := violations(c.graph); !slices.Equal(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
