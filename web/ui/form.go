//go:build js && wasm

package main

// The run form's handlers: every edit changes Spec (and the URL).

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/vugu/vugu"

	"logitscope/snapshot"
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
	r.SnapID, r.Ran = "", false
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
		s.Model = v
	case "ref":
		s.Ref = v
	case "test":
		s.Test = v
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

// ModelNames lists the models to choose from, the spec's own included.
func (r *Root) ModelNames() []string {
	var names []string
	for _, m := range r.Models {
		names = append(names, m.Name)
	}
	if !slices.Contains(names, r.Spec.Model) {
		names = append(names, r.Spec.Model)
	}
	return names
}

// Variants lists the model's variants, f32 first, then the spec's own if
// the model does not list them (the run then says what is wrong).
func (r *Root) Variants() []string {
	vs := []string{"f32"}
	if m := r.model(r.Spec.Model); m != nil {
		for _, v := range m.Variants {
			if !slices.Contains(vs, v.Scheme) {
				vs = append(vs, v.Scheme)
			}
		}
	} else {
		vs = append(vs, "q8", "q6", "q4")
	}
	for _, v := range []string{r.Spec.Ref, r.Spec.Test} {
		if !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	return vs
}

// VariantNote is a variant's label: its download size and, when it
// quantizes only some matrices, its policy.
func (r *Root) VariantNote(v string) string {
	if m := r.model(r.Spec.Model); m != nil {
		for _, x := range m.Variants {
			if x.Scheme != v {
				continue
			}
			if x.Bytes > 0 {
				v += " (" + size(x.Bytes) + ")"
			}
			if x.Policy != "" {
				v += " " + x.Policy
			}
		}
	}
	return v
}

// DeviceNote says where the chosen device runs.
func (r *Root) DeviceNote() string {
	switch {
	case !r.ProbeDone:
		return ""
	case r.Spec.Device == "cpu":
		return "the engine's CPU path (small models)"
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
