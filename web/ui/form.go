//go:build js && wasm

package main

// The run form's handlers: every edit changes Spec (and the URL).

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/vugu/vugu"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/model/ggufmodel"
)

// setSpec loads s into the form.
func (r *Root) setSpec(s snapshot.Spec) {
	r.Spec = s
	r.MaxNewText = strconv.Itoa(s.MaxNew)
	r.WindowText = strconv.Itoa(s.Window)
	r.StopsText = ""
	if s.Stops != nil {
		parts := make([]string, len(*s.Stops))
		for i, id := range *s.Stops {
			parts[i] = strconv.Itoa(id)
		}
		r.StopsText = strings.Join(parts, ", ")
	}
	clear(r.FieldErr)
}

// edited follows an edit: the form no longer shows a shared snapshot's or
// a finished run's spec, so the URL says the new spec without autorun.
func (r *Root) edited() {
	r.SnapID, r.SnapURL, r.Ran = "", "", false
	r.syncURL()
}

// value is an input's value in an event.
func value(e vugu.DOMEvent) string { return e.PropString("target", "value") }

// checked is a checkbox's state in an event.
func checked(e vugu.DOMEvent) bool { return e.PropBool("target", "checked") }

// SetField sets one of the form's fields from an input event.
func (r *Root) SetField(field string, e vugu.DOMEvent) {
	v := value(e)
	s := &r.Spec
	delete(r.FieldErr, field)
	switch field {
	case "model":
		// Choosing "a model folder from this computer" takes the folder
		// already chosen, if any.
		if v == snapshot.LocalPrefix && r.Folder != nil && r.Folder.Name != "" {
			v += r.Folder.Name + "/"
		}
		if v != s.Model {
			s.Fingerprint = "" // another model's
			r.takeReady(r.model(s.Model), r.model(v))
		}
		s.Model = v
	case "ref", "test":
		// Choosing "a file from this computer" keeps the file already
		// chosen for the side, if any.
		if v == snapshot.LocalPrefix {
			if lf := r.Local[field]; lf != nil {
				v += lf.Name
			}
		}
		r.setSide(field, v)
	case "device":
		s.Device = v
	case "mode":
		s.Mode = v
	case "prompt":
		s.Prompt = v
	case "panel":
		s.Panel = v
	case "system":
		s.System = v
	case "max_new":
		r.MaxNewText = v
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 1 {
			s.MaxNew = n
		} else {
			r.FieldErr[field] = "max new tokens: a whole number ≥ 1"
		}
	case "window":
		r.WindowText = v
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 2 {
			s.Window = n
		} else {
			r.FieldErr[field] = "window: a whole number ≥ 2"
		}
	case "stops":
		r.StopsText = v
		// ParseQuery's rules, so the form accepts what a link does.
		p, err := snapshot.ParseQuery(url.Values{"stops": {v}})
		if err != nil {
			r.FieldErr[field] = err.Error()
		} else {
			s.Stops = p.Stops
		}
	}
	r.edited()
}

// takeReady moves the form from model old's ready texts and test side to
// model m's: a prompt or panel still as old offered it (untouched) takes
// m's, and a test side m does not have takes m's default.
func (r *Root) takeReady(old, m *modelInfo) {
	if m == nil {
		return
	}
	was := readySpec(snapshot.Spec{}, nil, old)
	now := readySpec(snapshot.Spec{}, nil, m)
	s := &r.Spec
	if s.Prompt == was.Prompt {
		s.Prompt = now.Prompt
	}
	if s.Panel == was.Panel {
		s.Panel = now.Panel
	}
	if !m.has(s.Test) {
		s.Test = m.defaultTest()
	}
}

// SetStopsDefault switches between the model's eos ids (nil) and the
// listed ids.
func (r *Root) SetStopsDefault(e vugu.DOMEvent) {
	delete(r.FieldErr, "stops")
	if checked(e) {
		r.Spec.Stops = nil
		r.StopsText = ""
	} else {
		ids := []int{}
		r.Spec.Stops = &ids
	}
	r.edited()
}

// SetMode switches between greedy decoding and the teacher-forced panel.
func (r *Root) SetMode(mode string) {
	if r.Spec.Mode != mode {
		r.Spec.Mode = mode
		r.edited()
	}
}

// ModelNames lists the models to choose from: the server's, the spec's
// own, and last a model folder from this computer (the chosen folder, or
// the link's, when there is one).
func (r *Root) ModelNames() []string {
	var names []string
	for _, m := range r.Models {
		names = append(names, m.Name)
	}
	local := snapshot.LocalPrefix
	switch {
	case r.IsLocalModel():
		local = r.Spec.Model
	case r.Folder != nil && r.Folder.Name != "":
		local += r.Folder.Name + "/"
	}
	if !r.IsLocalModel() && !slices.Contains(names, r.Spec.Model) {
		names = append(names, r.Spec.Model)
	}
	return append(names, local)
}

// ModelLabel is a model choice's label.
func (r *Root) ModelLabel(m string) string { return modelName(m) }

// Variants lists side's choices: f32, the model's variants and GGUF
// files, then the spec's own if the model does not list them (the run then
// says what is wrong), and last a GGUF file from this computer (the side's
// local file when it has one).
func (r *Root) Variants(side string) []string {
	vs := []string{"f32"}
	if m := r.model(r.Spec.Model); m != nil {
		for _, v := range m.Variants {
			if !slices.Contains(vs, v.Name) {
				vs = append(vs, v.Name)
			}
		}
	}
	for _, v := range []string{r.Spec.Ref, r.Spec.Test} {
		if _, local := snapshot.LocalName(v); !local && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	if r.IsLocal(side) {
		return append(vs, r.sideVariant(side))
	}
	return append(vs, snapshot.LocalPrefix)
}

// VariantNote is a choice's label: a variant's download size and, when it
// quantizes only some matrices, its policy; a GGUF file's size and type
// mix; a hub checkpoint's size and format; a local file's name.
func (r *Root) VariantNote(v string) string {
	if name, local := snapshot.LocalName(v); local {
		if name == "" {
			return "a GGUF file from this computer…"
		}
		return name + " (from this computer)"
	}
	if m := r.model(r.Spec.Model); m != nil {
		if !m.has(v) {
			return v + " (not on the server: Run says how to make it)"
		}
		for _, x := range m.Variants {
			if x.Name != v {
				continue
			}
			if x.Bytes > 0 {
				v += " (" + size(x.Bytes) + ")"
			}
			if x.Policy != "" {
				v += " " + x.Policy
			}
			if len(x.Types) > 0 {
				v += " " + ggufmodel.Mix(x.Types)
			}
			if x.Format != "" {
				v += " " + x.Format
			}
			if x.Kind == "onnx" {
				v += " onnxruntime-web"
			}
		}
	}
	return v
}

// VariantHint says, under the sides, that the model has no quantized
// variant and how to make one; "" when it has one or is not known yet.
func (r *Root) VariantHint() string {
	m := r.model(r.Spec.Model)
	if m == nil || slices.ContainsFunc(m.Variants, func(v variantInfo) bool { return v.Kind == "variant" }) {
		return ""
	}
	return modelName(r.Spec.Model) + " has no quantized variant. " + quantizeHint(r.Spec.Model, "q4")
}

// ModelNote says what the chosen model is: its nature and its sidecar's
// line; "" until the model is known.
func (r *Root) ModelNote() string {
	m := r.model(r.Spec.Model)
	if m == nil {
		return ""
	}
	return natureLine(natureOf(m))
}

// IsLocal says whether side runs a file from this computer: the form then
// shows its file input.
func (r *Root) IsLocal(side string) bool {
	_, local := snapshot.LocalName(r.sideVariant(side))
	return local
}

// LocalNote says what the form knows of side's local file: its size and
// type mix, how far hashing has come, or what is wrong with it; or, for a
// link that names a file nobody chose here yet, that it must be chosen.
func (r *Root) LocalNote(side string) string {
	name, _ := snapshot.LocalName(r.sideVariant(side))
	lf := r.Local[side]
	switch {
	case lf == nil && name != "":
		return "This link ran " + name + " from its author's disk. Files never leave the browser that reads them, so a link cannot carry one: choose your copy to run it."
	case lf == nil:
		return ""
	case lf.Err != "":
		return lf.Err
	case lf.HashErr != "":
		return lf.HashErr
	}
	s := lf.Name + " · " + size(lf.Bytes)
	if lf.Types != nil {
		s += " · " + ggufmodel.Mix(lf.Types)
	}
	if lf.Sum != "" {
		s += " · sha256 " + short(lf.Sum)
	} else if lf.Bytes > 0 {
		s += fmt.Sprintf(" · hashing %.0f%%", 100*lf.Hashed/lf.Bytes)
	}
	return s
}

// DeviceNote says where the chosen device runs.
func (r *Root) DeviceNote() string {
	switch {
	case !r.ProbeDone:
		return ""
	case r.Spec.Device == "cpu":
		return "the engine's CPU path (small models)"
	case r.Probe.WebGPU && r.Spec.Device == "auto" && softwareAdapter(r.Probe.Adapter):
		return "WebGPU: " + r.Probe.Adapter + ", a software renderer: auto runs on the CPU path, which is faster there (choose gpu to use it anyway)"
	case r.Probe.WebGPU:
		return "WebGPU: " + r.Probe.Adapter
	case r.Spec.Device == "auto":
		return "no WebGPU here: auto runs on the CPU"
	}
	return "no WebGPU here: gpu will fail"
}

// Busy is true while something runs: the form's Run is disabled.
func (r *Root) Busy() bool { return r.State == "running" }

// RunLabel is the Run button's text.
func (r *Root) RunLabel() string {
	switch {
	case r.Busy():
		return "Running…"
	case r.Doc != nil && r.Source == "snapshot":
		return "Rerun"
	}
	return "Run"
}

// Submit runs the form (the form's submit event).
func (r *Root) Submit(e vugu.DOMEvent) {
	e.PreventDefault()
	r.Run()
}

// NoGPUReason is the probe's reason as a sentence.
func (r *Root) NoGPUReason() string {
	s := strings.TrimSpace(r.Probe.Reason)
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
