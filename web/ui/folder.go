//go:build js && wasm

package main

// A model folder from this computer: a Hugging Face checkpoint directory
// the user chose (<input type=file webkitdirectory>), run exactly as a
// served model. The worker reads its Files where they lie (wasi.js's
// BlobFile); this file reads what the form and the run need of it (the
// config, the tokenizer and chat template, the variants' manifests, the
// GGUF files' headers) from the same Files, and fingerprints the
// checkpoint when a run needs it. No byte of it goes to the server.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/vugu/vugu"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/lookup"
	"logitscope/internal/format/sidecar"
	"logitscope/internal/model"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// localFolder is the model folder chosen from this computer. Its fields
// change under the EventEnv lock; ready is closed once Info or Err is set.
type localFolder struct {
	Name  string              // the folder's name, as the link names it
	Files map[string]js.Value // the model's files (modelFile) by path inside the folder
	Bytes float64             // their sizes together
	Read  bool                // Info or Err is set
	Err   string              // why it cannot run: no config.json, an architecture the engine does not run, …
	Notes []string            // files left out, and why
	Info  modelInfo           // what the form lists, as GET /models/ lists a served model
	Hub   string              // where the page downloaded it from (hub.go), or "" for a folder from this computer
	// GGUF holds the GGUF files at the folder's top whose header reads,
	// by name; their hashes are read when a run uses them.
	GGUF map[string]*localFile
	// manifests maps a variant's scheme to the checkpoint fingerprint its
	// manifest records (model_sha256). engine.wasm opens a variant only
	// when the folder's fingerprint is that one, so a run with a variant
	// side knows the fingerprint without hashing the weights again.
	manifests map[string]string
	ready     chan struct{}

	// The tokenizer and chat template, read when a run first needs them
	// (under Root.tokMu).
	tok  *tokenizer.Tokenizer
	chat *chat.TemplateConfig

	fp    sync.Once // starts hashing the checkpoint
	FP    folderHash
	fpEnd chan struct{} // closed once FP.Sum or FP.Err is set
}

// folderHash is the progress and result of fingerprinting a folder's
// checkpoint (checkpoint.FingerprintOf: config.json and every weights
// shard, hashed here).
type folderHash struct {
	Hashed, Total float64
	Sum, Err      string
}

// PickFolder takes the folder chosen in the form's folder input: the
// model is now that folder, read in the background.
func (r *Root) PickFolder(e vugu.DOMEvent) {
	files := js.Value(e.JSEventTarget()).Get("files")
	lf := newFolder("")
	for i := range files.Get("length").Int() {
		f := files.Index(i)
		// webkitRelativePath is "FOLDER/path/inside" (a browser that
		// ignores webkitdirectory gives none: no folder, no model).
		top, rel, ok := strings.Cut(f.Get("webkitRelativePath").String(), "/")
		if !ok {
			continue
		}
		lf.Name = top
		if modelFile(rel) {
			lf.Files[rel] = f
			lf.Bytes += f.Get("size").Float()
		}
	}
	if len(lf.Files) == 0 {
		// Chromium leaves out links (a Hugging Face cache's snapshot
		// folder is all links) and lists an empty folder as no files.
		what := "the chosen folder"
		if lf.Name != "" {
			what = "folder " + lf.Name
		}
		lf.Err = what + " holds none of a model's files (config.json, *.safetensors, tokenizer.json): choose the folder that holds them. Browsers do not follow links, so a Hugging Face cache's snapshots folder will not do: download with --local-dir, or copy the files."
		lf.Read = true
		close(lf.ready)
	} else {
		go r.readFolder(lf)
	}
	r.chooseFolder(lf)
}

// newFolder is an empty model folder called name.
func newFolder(name string) *localFolder {
	return &localFolder{Name: name, Files: map[string]js.Value{}, GGUF: map[string]*localFile{}, manifests: map[string]string{},
		ready: make(chan struct{}), fpEnd: make(chan struct{})}
}

// chooseFolder makes lf (being read) the model: a folder chosen from this
// computer, or one downloaded from the hub (hub.go).
func (r *Root) chooseFolder(lf *localFolder) {
	// A link's fingerprint holds for the first folder chosen under its
	// name: the run then checks it. Another folder runs as it is.
	if name, _ := snapshot.LocalModel(r.Spec.Model); r.Folder != nil || name != lf.Name {
		r.Spec.Fingerprint = ""
	}
	r.Folder = lf
	if lf.Name != "" {
		r.Spec.Model = snapshot.LocalPrefix + lf.Name + "/"
	}
	r.edited()
}

// readFolder reads what the form shows of lf and what a run needs first.
// Goroutines only.
func (r *Root) readFolder(lf *localFolder) {
	info, notes, err := folderInfo(lf)
	r.update(func() {
		lf.Read = true
		if err != nil {
			lf.Err = err.Error()
		} else {
			lf.Info, lf.Notes = info, notes
		}
		close(lf.ready)
		r.autorunLocal()
	})
}

// folderInfo reads lf's config.json (refusing a model the engine does not
// run, as the engine would), checks that it has a tokenizer, and lists its
// variants (their manifests) and GGUF files (their headers), as
// GET /models/ lists a served model; notes say what it left out.
// Goroutines only.
func folderInfo(lf *localFolder) (modelInfo, []string, error) {
	info := modelInfo{Name: snapshot.LocalPrefix + lf.Name + "/"}
	data, err := lf.file("config.json")
	switch {
	case err != nil:
		return info, nil, err
	case data == nil:
		return info, nil, fmt.Errorf("folder %s has no config.json: choose the model's own folder, the one holding config.json and the safetensors", lf.Name)
	}
	cfg, err := checkpoint.ParseConfig(data, lf.Name+"/config.json")
	if err != nil {
		return info, nil, err
	}
	if _, err := model.GeometryOf(cfg); err != nil {
		return info, nil, fmt.Errorf("%s/%w", lf.Name, err) // "config.json: architecture … is not supported"
	}
	if _, ok := lf.Files["tokenizer.json"]; !ok {
		return info, nil, fmt.Errorf("folder %s has no tokenizer.json: the page needs it to tokenize the prompt", lf.Name)
	}
	info.Architecture, info.Vocab = cfg.Arch(), cfg.VocabSize
	var notes []string
	// What the folder's sidecar says of it, as the server lists it.
	if data, err := lf.file(sidecar.File); data != nil || err != nil {
		var n sidecar.Note
		if err == nil {
			n, err = sidecar.Parse(data, lf.Name+"/"+sidecar.File)
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s left out: %v", sidecar.File, err))
		} else {
			info.Nature, info.About, info.Prompt, info.Panel = n.Nature, n.About, n.Prompt, n.Panel
		}
	}
	for _, s := range quant.Schemes {
		data, err := lf.file("variants/" + string(s) + "/manifest.json")
		if data == nil && err == nil {
			continue
		}
		var m variant.Manifest
		if err == nil {
			err = json.Unmarshal(data, &m)
		}
		if err != nil {
			// The server leaves out a variant that does not verify too.
			notes = append(notes, fmt.Sprintf("variants/%s left out: manifest.json: %v", s, err))
			continue
		}
		v := variantInfo{Kind: "variant", Name: string(s), Policy: m.Policy.String()}
		for _, sh := range m.Shards {
			v.Bytes += float64(sh.Size)
		}
		info.Variants = append(info.Variants, v)
		lf.manifests[string(s)] = m.Model
	}
	var ggufs []string
	for p := range lf.Files {
		if gguf.IsFileName(p) {
			ggufs = append(ggufs, p)
		}
	}
	slices.Sort(ggufs)
	for _, name := range ggufs {
		f := lf.Files[name]
		g := &localFile{File: f, Name: name, Bytes: f.Get("size").Float(), hashed: make(chan struct{})}
		types, err := localTypes(g)
		if err != nil {
			notes = append(notes, name+" left out: "+err.Error())
			continue
		}
		g.Types = types
		lf.GGUF[name] = g
		info.Variants = append(info.Variants, variantInfo{Kind: "gguf", Name: name, Bytes: g.Bytes, Types: types})
	}
	hubs, more := folderHubs(lf)
	info.Variants = append(info.Variants, hubs...)
	return info, append(notes, more...), nil
}

// folderHubs lists lf's hub checkpoints (hub/DIR with a config.json whose
// quantization a reader here takes), in name order, as the server lists a
// served model's; the engine checks the rest (the same model, every
// tensor) when one runs. Notes say what it left out. Goroutines only.
func folderHubs(lf *localFolder) ([]variantInfo, []string) {
	bytes := map[string]float64{}
	for p, f := range lf.Files {
		if rest, ok := strings.CutPrefix(p, snapshot.HubPrefix); ok {
			dir, _, _ := strings.Cut(rest, "/")
			bytes[dir] += f.Get("size").Float()
		}
	}
	var out []variantInfo
	var notes []string
	for _, dir := range slices.Sorted(maps.Keys(bytes)) {
		name := snapshot.HubPrefix + dir
		data, err := lf.file(name + "/config.json")
		var f lookup.Format
		switch {
		case err != nil:
		case data == nil:
			err = errors.New("no config.json")
		default:
			if f, err = hubquant.FormatOf(data, lf.Name+"/"+name+"/config.json"); err == nil && f == nil {
				err = errors.New("its config.json names no quantization")
			}
		}
		if err != nil {
			notes = append(notes, name+" left out: "+err.Error())
			continue
		}
		out = append(out, variantInfo{Kind: "hub", Name: name, Bytes: bytes[dir], Format: f.Name()})
	}
	return out, notes
}

// file reads one of lf's files whole (a config, a tokenizer); nil when
// the folder has no such file. Goroutines only.
func (lf *localFolder) file(name string) ([]byte, error) {
	f, ok := lf.Files[name]
	if !ok {
		return nil, nil
	}
	b, err := blobBytes(f, 0, int64(f.Get("size").Float()))
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %v", lf.Name, name, err)
	}
	return b, nil
}

// folderArg is lf's files as the bridge's open takes them: [{path, file}],
// the Files themselves (posted to the worker as references, not copies).
func folderArg(lf *localFolder) js.Value {
	arr := global.Get("Array").New()
	for _, p := range slices.Sorted(maps.Keys(lf.Files)) {
		o := global.Get("Object").New()
		o.Set("path", p)
		o.Set("file", lf.Files[p])
		arr.Call("push", o)
	}
	return arr
}

// startFingerprint starts hashing lf's checkpoint in the background (once).
func (r *Root) startFingerprint(lf *localFolder) {
	lf.fp.Do(func() { go r.hashFolder(lf) })
}

// hashFolder fingerprints lf's checkpoint as checkpoint.Fingerprint does:
// config.json, then the weights shards Open reads, each hashed here a
// chunk at a time. Goroutines only.
func (r *Root) hashFolder(lf *localFolder) {
	sum, err := r.fingerprintFiles(lf)
	r.update(func() {
		if err != nil {
			lf.FP.Err = err.Error()
		} else {
			lf.FP.Sum = sum
		}
	})
	close(lf.fpEnd)
}

func (r *Root) fingerprintFiles(lf *localFolder) (string, error) {
	index, err := lf.file("model.safetensors.index.json")
	if err != nil {
		return "", err
	}
	shards, err := checkpoint.WeightFiles(index, lf.Name+"/model.safetensors.index.json")
	if err != nil {
		return "", err
	}
	names := append([]string{"config.json"}, shards...)
	var total float64
	for _, n := range names {
		f, ok := lf.Files[n]
		if !ok {
			return "", fmt.Errorf("folder %s has no %s", lf.Name, n)
		}
		total += f.Get("size").Float()
	}
	r.update(func() { lf.FP.Total = total })
	var sums []checkpoint.FileSum
	var done float64
	shown := time.Now()
	for _, n := range names {
		f := lf.Files[n]
		size := int64(f.Get("size").Float())
		h := sha256.New()
		for off := int64(0); off < size; off += hashChunk {
			if !r.folderChosen(lf) {
				return "", fmt.Errorf("folder %s was replaced by another", lf.Name)
			}
			b, err := blobBytes(f, off, min(off+hashChunk, size))
			if err != nil {
				return "", fmt.Errorf("reading %s/%s: %v", lf.Name, n, err)
			}
			h.Write(b)
			done += float64(len(b))
			if time.Since(shown) > 250*time.Millisecond {
				d := done
				r.update(func() { lf.FP.Hashed = d })
				shown = time.Now()
			}
		}
		sums = append(sums, checkpoint.FileSum{Name: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	return checkpoint.FingerprintOf(sums), nil
}

// folderChosen says whether lf is still the chosen folder. Goroutines only.
func (r *Root) folderChosen(lf *localFolder) bool {
	r.ee.RLock()
	defer r.ee.RUnlock()
	return r.Folder == lf
}

// fingerprint is the checkpoint fingerprint of the folder a run used:
// a variant side's manifest's model_sha256, which engine.wasm checked
// against the folder's weights when it opened that side, or else, when a
// side ran the checkpoint's own weights (f32), the folder hashed here
// (showing its progress); "" when both sides were GGUF files, whose
// sha256s say what ran (the safetensors did not). Goroutines only.
func (r *Root) fingerprint(lf *localFolder, spec snapshot.Spec) (string, error) {
	for _, v := range []string{spec.Ref, spec.Test} {
		if fp := lf.manifests[v]; fp != "" {
			return fp, nil
		}
	}
	if !hashesFolder(lf, spec) {
		return "", nil
	}
	r.startFingerprint(lf)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-lf.fpEnd:
			waiting = false
		case <-tick.C:
			r.update(func() {
				r.Progress = progress{Phase: "sha256", Message: "checkpoint fingerprint of " + lf.Name, Loaded: lf.FP.Hashed, Total: lf.FP.Total}
			})
		}
	}
	r.ee.RLock()
	defer r.ee.RUnlock()
	if lf.FP.Err != "" {
		return "", errors.New(lf.FP.Err)
	}
	return lf.FP.Sum, nil
}

// hashesFolder says whether a run of spec fingerprints its folder by
// hashing it: a side runs the checkpoint's own weights (f32) and neither
// is a variant whose manifest says the fingerprint.
func hashesFolder(lf *localFolder, spec snapshot.Spec) bool {
	return (spec.Ref == "f32" || spec.Test == "f32") && lf.manifests[spec.Ref] == "" && lf.manifests[spec.Test] == ""
}

// IsLocalModel says whether the form's model is a folder from this
// computer: the form then shows its folder input.
func (r *Root) IsLocalModel() bool {
	_, local := snapshot.LocalModel(r.Spec.Model)
	return local
}

// folderFor is the chosen folder when it is the one model names, else nil.
func (r *Root) folderFor(model string) *localFolder {
	name, local := snapshot.LocalModel(model)
	if !local || r.Folder == nil || r.Folder.Name != name || name == "" {
		return nil
	}
	return r.Folder
}

// FolderNote says what the form knows of the model folder: what it holds,
// what is wrong with it, or, for a link that names a folder nobody chose
// here yet, that it must be chosen.
func (r *Root) FolderNote() string {
	name, _ := snapshot.LocalModel(r.Spec.Model)
	lf := r.Folder
	switch {
	case lf != nil && lf.Err != "":
		return lf.Err
	case lf == nil || lf.Name != name:
		if name == "" {
			return "Choose the folder of a Hugging Face model: config.json, tokenizer.json, the safetensors, and any variants/ or .gguf files beside them."
		}
		s := "This link ran the model folder " + name + " from its author's disk"
		if r.Spec.Fingerprint != "" {
			s += " (checkpoint fingerprint " + short(r.Spec.Fingerprint) + ")"
		}
		return s + ". Files never leave the browser that reads them, so a link cannot carry them: choose your copy of the folder to run it."
	case !lf.Read:
		return lf.Name + " · reading…"
	}
	what := lf.Name
	if lf.Hub != "" {
		what += " (" + lf.Hub + ")"
	}
	s := fmt.Sprintf("%s · %s · vocab %d · %d files, %s", what, lf.Info.Architecture, lf.Info.Vocab, len(lf.Files), size(lf.Bytes))
	var vs []string
	for _, v := range lf.Info.Variants {
		vs = append(vs, v.Name)
	}
	if len(vs) > 0 {
		s += " · beside f32: " + strings.Join(vs, ", ")
	}
	switch {
	case lf.FP.Err != "":
		s += " · checkpoint fingerprint: " + lf.FP.Err
	case lf.FP.Sum != "":
		s += " · checkpoint fingerprint " + short(lf.FP.Sum)
	case lf.FP.Total > 0:
		s += fmt.Sprintf(" · fingerprinting %.0f%%", 100*lf.FP.Hashed/lf.FP.Total)
	case r.Spec.Fingerprint != "":
		s += " · a run checks it is the link's checkpoint (" + short(r.Spec.Fingerprint) + ")"
	}
	for _, n := range lf.Notes {
		s += " · " + n
	}
	return s
}
