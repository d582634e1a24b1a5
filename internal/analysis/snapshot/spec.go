package snapshot

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"logitscope/internal/format/exl3"
	"logitscope/internal/format/gguf"
)

// Modes a page run can take.
const (
	Greedy = "greedy" // the reference decodes; the test side follows its tokens
	Panel  = "panel"  // both sides are teacher-forced on windows of a text
)

// Defaults of a Spec's fields, as a bare link gets them.
const (
	DefaultModel  = "demo"
	DefaultRef    = "f32"
	DefaultTest   = "q4"
	DefaultMaxNew = 16
	DefaultWindow = 64
	DefaultDevice = "auto"
)

// LocalPrefix marks a side whose GGUF file the user chose from their own
// disk ("local:model-Q4_K_M.gguf"), or a model whose folder they chose
// ("local:Qwen3-0.6B/"). The page reads it in place and sends it nowhere,
// so a link can name the file or folder but not carry it: whoever opens
// the link is asked to choose their copy.
const LocalPrefix = "local:"

// Spec is one run as the page's URL carries it: a link reruns it.
type Spec struct {
	Model string `json:"model"` // a model the server lists, or LocalPrefix + a folder's name + "/"
	// Fingerprint is a local model's checkpoint fingerprint
	// (checkpoint.Fingerprint: the sha256 over config.json's and every
	// weights shard's sha256), once a run has measured it: a link that
	// reruns the spec runs only a folder with the same weights.
	Fingerprint string `json:"fingerprint,omitempty"`
	Ref         string `json:"ref"`  // f32 | q8 | q6 | q4 | exl3-kK-CODEBOOK | a GGUF file in the model dir | HubPrefix + a hub checkpoint's dir | ONNXPrefix + an ONNX export's name | LocalPrefix + a GGUF file's name
	Test        string `json:"test"` // the same choices
	Mode        string `json:"mode"`
	System      string `json:"system,omitempty"`  // greedy; "": no system turn (the template's own default, if any)
	Prompt      string `json:"prompt,omitempty"`  // greedy: the user turn
	MaxNew      int    `json:"max_new,omitempty"` // greedy
	Stops       *[]int `json:"stops,omitempty"`   // greedy; nil: the model's eos ids, []: none
	Panel       string `json:"panel,omitempty"`   // panel: the text
	Window      int    `json:"window,omitempty"`  // panel: tokens per window
	Device      string `json:"device"`            // auto | gpu | cpu
}

// NewSpec is the spec a link without parameters means.
func NewSpec() Spec {
	return Spec{Model: DefaultModel, Ref: DefaultRef, Test: DefaultTest, Mode: Greedy,
		MaxNew: DefaultMaxNew, Window: DefaultWindow, Device: DefaultDevice}
}

var variants = []string{"f32", "q8", "q6", "q4"}

// HubPrefix starts a side that runs a checkpoint a hub tool quantized
// (GPTQ, AWQ, compressed-tensors, MLX, bitsandbytes), hub/DIR: a
// directory under the model's hub/, where quantize --format writes it.
const HubPrefix = "hub/"

// checkVariant says why v cannot be a side: it must be one of variants, an
// EXL3 variant's (exl3-k4-mcg), a GGUF file's name (a plain file name, as
// the server lists the files beside config.json), or LocalPrefix and one,
// or a hub checkpoint's (HubPrefix and a plain directory name).
func checkVariant(v string) error {
	if slices.Contains(variants, v) {
		return nil
	}
	if dir, ok := strings.CutPrefix(v, HubPrefix); ok {
		if !plainName(dir) {
			return fmt.Errorf("a hub checkpoint is named %sDIR, DIR a plain directory name under the model's hub/", HubPrefix)
		}
		return nil
	}
	if strings.HasPrefix(v, ONNXPrefix) {
		return checkONNX(v)
	}
	if strings.HasPrefix(v, "exl3-") {
		// An EXL3 variant, by the name quantize gives its directory.
		f, err := exl3.ParseFormat(v)
		if err == nil && f.String() != v {
			err = fmt.Errorf("an EXL3 variant is named %s", f)
		}
		return err
	}
	name, local := LocalName(v)
	switch {
	case local && name == "":
		return errors.New("choose a local GGUF file")
	case !gguf.IsFileName(name):
		return fmt.Errorf("want one of %s, a .gguf file of the model, %sDIR or %sFILE.gguf", strings.Join(variants, ", "), HubPrefix, LocalPrefix)
	case !GGUFName(name):
		return errors.New("a GGUF file is named by a plain file name")
	}
	return nil
}

// ONNXPrefix starts a side that runs an ONNX export of the model through
// onnxruntime-web ("onnx/q4.onnx": the server's MODEL/onnx/q4.onnx).
const ONNXPrefix = "onnx/"

// IsONNX says whether side v runs an ONNX export.
func IsONNX(v string) bool { return strings.HasPrefix(v, ONNXPrefix) }

// checkONNX says why v cannot name an ONNX export: onnx/ and a plain
// file name ending in .onnx.
func checkONNX(v string) error {
	name := strings.TrimPrefix(v, ONNXPrefix)
	if !plainName(name) || !strings.HasSuffix(strings.ToLower(name), ".onnx") {
		return fmt.Errorf("an ONNX export is named %sNAME.onnx, NAME a plain file name", ONNXPrefix)
	}
	return nil
}

// GGUFName says whether name can name a GGUF file beside config.json: a
// plain, visible file name (the server serves no other), without control
// characters, ending in .gguf.
func GGUFName(name string) bool {
	return gguf.IsFileName(name) && plainName(name)
}

// plainName says whether name is one visible path segment of at most 255
// bytes without control characters: what a file or folder the page names
// can be called.
func plainName(name string) bool {
	return name != "" && len(name) <= 255 && name[0] != '.' &&
		!strings.ContainsAny(name, `/\`) && !strings.ContainsFunc(name, unicode.IsControl)
}

// LocalName is the file name of a side read from the user's disk, and
// whether v is one.
func LocalName(v string) (string, bool) {
	return strings.CutPrefix(v, LocalPrefix)
}

// LocalModel is the folder name of a model read from the user's disk
// (LocalPrefix + NAME + "/"), and whether model is one; LocalPrefix alone
// is a local model whose folder is not chosen yet (name "").
func LocalModel(model string) (string, bool) {
	rest, ok := strings.CutPrefix(model, LocalPrefix)
	return strings.TrimSuffix(rest, "/"), ok
}

// checkModel says why m cannot name a model: a served model's name, or a
// local folder's, LocalPrefix + NAME + "/".
func checkModel(m, fingerprint string) error {
	name, local := LocalModel(m)
	switch {
	case m == "":
		return errors.New("empty")
	case local && name == "":
		return errors.New("choose a model folder from this computer")
	case local && (m != LocalPrefix+name+"/" || !plainName(name)):
		return fmt.Errorf("a model folder is named %sNAME/, NAME a plain folder name", LocalPrefix)
	case fingerprint != "" && !local:
		return errors.New("a fingerprint names a local folder's checkpoint; the server's models need none")
	case fingerprint != "" && !isSHA256(fingerprint):
		return fmt.Errorf("fingerprint %q: want 64 lowercase hex digits", fingerprint)
	}
	return nil
}

// Check names the first field that cannot run.
func (s Spec) Check() error {
	if err := checkVariant(s.Ref); err != nil {
		return fmt.Errorf("ref %q: %v", s.Ref, err)
	}
	if err := checkVariant(s.Test); err != nil {
		return fmt.Errorf("test %q: %v", s.Test, err)
	}
	if err := checkModel(s.Model, s.Fingerprint); err != nil {
		return fmt.Errorf("model %q: %v", s.Model, err)
	}
	switch {
	case s.Device != "auto" && s.Device != "gpu" && s.Device != "cpu":
		return fmt.Errorf("device %q: want auto, gpu or cpu", s.Device)
	}
	switch s.Mode {
	case Greedy:
		if s.Prompt == "" {
			return fmt.Errorf("prompt: empty")
		}
		if s.MaxNew < 1 {
			return fmt.Errorf("max_new %d: want at least 1", s.MaxNew)
		}
	case Panel:
		if strings.TrimSpace(s.Panel) == "" {
			return fmt.Errorf("panel: empty text")
		}
		if s.Window < 2 {
			return fmt.Errorf("window %d: want at least 2 tokens", s.Window)
		}
	default:
		return fmt.Errorf("mode %q: want greedy or panel", s.Mode)
	}
	return nil
}

// Query encodes s for a link. Fields of the other mode are left out, so a
// link says only what the run uses.
func (s Spec) Query() url.Values {
	q := url.Values{}
	q.Set("model", s.Model)
	if s.Fingerprint != "" {
		q.Set("fp", s.Fingerprint)
	}
	q.Set("ref", s.Ref)
	q.Set("test", s.Test)
	q.Set("mode", s.Mode)
	q.Set("device", s.Device)
	switch s.Mode {
	case Panel:
		q.Set("panel", s.Panel)
		q.Set("window", strconv.Itoa(s.Window))
	default:
		q.Set("prompt", s.Prompt)
		q.Set("max_new", strconv.Itoa(s.MaxNew))
		if s.System != "" {
			q.Set("system", s.System)
		}
		if s.Stops != nil {
			q.Set("stops", joinInts(*s.Stops))
		}
	}
	return q
}

// Linked is s as its link carries it: the fields of the other mode, which
// Query leaves out, at NewSpec's values. A run records this, so that a
// document's spec says only what the run used (the form keeps both
// modes' texts, ready to switch).
func (s Spec) Linked() Spec {
	l, err := ParseQuery(s.Query())
	if err != nil { // Query writes only what ParseQuery reads
		panic(fmt.Sprintf("snapshot: Query of %+v does not parse: %v", s, err))
	}
	return l
}

// ParseQuery reads a link's spec; absent parameters take NewSpec's values
// and parameters it does not know (autorun, view state) are ignored.
func ParseQuery(q url.Values) (Spec, error) {
	s := NewSpec()
	str := func(key string, dst *string) {
		if q.Has(key) {
			*dst = q.Get(key)
		}
	}
	str("model", &s.Model)
	str("fp", &s.Fingerprint)
	str("ref", &s.Ref)
	str("test", &s.Test)
	str("mode", &s.Mode)
	str("device", &s.Device)
	str("prompt", &s.Prompt)
	str("panel", &s.Panel)
	str("system", &s.System)
	for key, dst := range map[string]*int{"max_new": &s.MaxNew, "window": &s.Window} {
		if !q.Has(key) {
			continue
		}
		n, err := strconv.Atoi(q.Get(key))
		if err != nil {
			return s, fmt.Errorf("%s=%q: not an integer", key, q.Get(key))
		}
		*dst = n
	}
	if q.Has("stops") {
		ids, err := parseInts(q.Get("stops"))
		if err != nil {
			return s, fmt.Errorf("stops=%q: %v", q.Get("stops"), err)
		}
		s.Stops = &ids
	}
	return s, nil
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// parseInts reads "1, 2,3"; "" is the empty list.
func parseInts(s string) ([]int, error) {
	ids := []int{}
	for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, n)
	}
	return ids, nil
}
