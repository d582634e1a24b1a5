package compressed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The compression formats (compressed-tensors' CompressionFormat).
const (
	packQuantized  = "pack-quantized"
	intQuantized   = "int-quantized"
	floatQuantized = "float-quantized"
	naiveQuantized = "naive-quantized"
	nvfp4Packed    = "nvfp4-pack-quantized"
	mixedPrecision = "mixed-precision"
	dense          = "dense"
)

// args is QuantizationArgs as config.json spells it; nil fields take
// compressed-tensors' defaults.
type args struct {
	NumBits        *int            `json:"num_bits"`
	Type           string          `json:"type"`
	Symmetric      *bool           `json:"symmetric"`
	GroupSize      *int            `json:"group_size"`
	Strategy       string          `json:"strategy"`
	BlockStructure json.RawMessage `json:"block_structure"`
	Dynamic        any             `json:"dynamic"`
	Actorder       any             `json:"actorder"`
}

// scheme is QuantizationScheme.
type scheme struct {
	Targets           []string `json:"targets"`
	Weights           *args    `json:"weights"`
	InputActivations  *args    `json:"input_activations"`
	OutputActivations *args    `json:"output_activations"`
	Format            *string  `json:"format"`
}

// qconfig is the quantization_config llm-compressor writes.
type qconfig struct {
	QuantMethod     string          `json:"quant_method"`
	Format          string          `json:"format"`
	ConfigGroups    json.RawMessage `json:"config_groups"`
	Ignore          []string        `json:"ignore"`
	KVCacheScheme   json.RawMessage `json:"kv_cache_scheme"`
	SparsityConfig  json.RawMessage `json:"sparsity_config"`
	TransformConfig json.RawMessage `json:"transform_config"`
}

// weights is a config group's resolved weight quantization.
type weights struct {
	bits      int
	float     bool
	symmetric bool
	strategy  string // tensor, channel, group, block, tensor_group
	groupSize int    // group, tensor_group
	block     [2]int // block: rows, cols
	actorder  string // "", "group", "weight"
}

// group is one resolved config group.
type group struct {
	name    string
	targets []target
	format  string
	w       weights
	acts    string // "", "int8", "fp8", "fp4"
	// raw is the group's scheme as read (Config writes it back).
	raw json.RawMessage
}

// target is one entry of targets or ignore: a module name, a "re:" regex
// (matched from the name's start, as Python's re.match) or a class name.
type target struct {
	text  string
	re    *regexp.Regexp
	class string // "Linear" or "Embedding"
}

// empty is a JSON value that says "absent": null, {} or nothing.
func empty(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null" || s == "{}"
}

// parseTarget reads a targets or ignore entry; field names it in errors.
func parseTarget(s, field string) (target, error) {
	if pat, ok := strings.CutPrefix(s, "re:"); ok {
		re, err := regexp.Compile("^(?:" + pat + ")")
		if err != nil {
			return target{}, fmt.Errorf("%s: regex %q does not compile in Go's RE2 syntax: %v", field, pat, err)
		}
		return target{text: s, re: re}, nil
	}
	if s == "Linear" || s == "Embedding" {
		return target{text: s, class: s}, nil
	}
	if s == "" || (s[0] >= 'A' && s[0] <= 'Z' && !strings.Contains(s, ".")) {
		return target{}, fmt.Errorf("%s: %q is a module class other than Linear or Embedding, which a weight name cannot be matched against", field, s)
	}
	return target{text: s}, nil
}

// rank is how specifically t matches module, as vLLM's
// find_matched_target orders them: 3 an exact name, 2 a regex, 1 a
// class, 0 no match.
func (t target) rank(module string) int {
	switch {
	case t.re != nil:
		if t.re.MatchString(module) {
			return 2
		}
	case t.class == "Linear":
		if !isEmbedding(module) {
			return 1
		}
	case t.class == "Embedding":
		if isEmbedding(module) {
			return 1
		}
	case t.text == module:
		return 3
	}
	return 0
}

// isEmbedding says whether a matrix module is an nn.Embedding rather
// than an nn.Linear, by its name (the writer and reader see weights, not
// classes): embed_tokens, wte, wpe, word_embeddings and the like.
func isEmbedding(module string) bool {
	last := module[strings.LastIndex(module, ".")+1:]
	return strings.Contains(last, "embed") || last == "wte" || last == "wpe"
}

// orderedGroups decodes config_groups keeping the file's order (a
// module matched equally by two groups takes the first, as
// compressed-tensors does).
func orderedGroups(raw json.RawMessage) ([]string, map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, fmt.Errorf("config_groups: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("config_groups: %v", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("config_groups: %v", err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, nil, fmt.Errorf("config_groups: %v", err)
		}
	}
	return keys, m, nil
}

// parseGroup resolves one config group under the config's format.
func parseGroup(name string, raw json.RawMessage, topFormat string) (*group, error) {
	field := "config_groups." + name
	if b := bytes.TrimSpace(raw); len(b) > 0 && b[0] == '[' {
		return nil, fmt.Errorf("%s: a preset scheme name with a list of targets; only explicit schemes are supported", field)
	}
	var s scheme
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	g := &group{name: name, format: topFormat, raw: raw}
	if s.Format != nil && *s.Format != "" {
		g.format = *s.Format
	}
	switch g.format {
	case packQuantized, intQuantized, floatQuantized, naiveQuantized, nvfp4Packed, dense:
	case mixedPrecision:
		return nil, fmt.Errorf("%s.format: the config is mixed-precision but this group names no format of its own", field)
	case "marlin-24", "sparse-24-bitmask", "sparse-bitmask":
		return nil, fmt.Errorf("%s: format %q (2:4 or bitmask sparsity) is not supported", field, g.format)
	default:
		return nil, fmt.Errorf("%s: unknown format %q", field, g.format)
	}
	if len(s.Targets) == 0 {
		return nil, fmt.Errorf("%s.targets: empty", field)
	}
	for i, t := range s.Targets {
		tg, err := parseTarget(t, fmt.Sprintf("%s.targets[%d]", field, i))
		if err != nil {
			return nil, err
		}
		g.targets = append(g.targets, tg)
	}
	if s.Weights == nil {
		return nil, fmt.Errorf("%s.weights: null; activation-only quantization is not supported", field)
	}
	w, err := parseWeights(s.Weights, field+".weights")
	if err != nil {
		return nil, err
	}
	g.w = w
	if err := checkLayout(g, field); err != nil {
		return nil, err
	}
	if s.OutputActivations != nil {
		return nil, fmt.Errorf("%s.output_activations: output quantization is not supported", field)
	}
	if g.acts, err = parseActs(s.InputActivations, field+".input_activations"); err != nil {
		return nil, err
	}
	return g, nil
}

// resolve applies QuantizationArgs' defaults and validation.
func resolve(a *args, field string) (weights, string, error) {
	w := weights{bits: 8, symmetric: true}
	if a.NumBits != nil {
		w.bits = *a.NumBits
	}
	switch strings.ToLower(a.Type) {
	case "", "int":
	case "float":
		w.float = true
	default:
		return w, "", fmt.Errorf("%s.type: %q, want \"int\" or \"float\"", field, a.Type)
	}
	if a.Symmetric != nil {
		w.symmetric = *a.Symmetric
	}
	w.strategy = strings.ToLower(a.Strategy)
	if w.strategy == "" {
		switch {
		case a.GroupSize == nil:
			w.strategy = "tensor"
		case *a.GroupSize > 0:
			w.strategy = "group"
		case *a.GroupSize == -1:
			w.strategy = "channel"
		default:
			return w, "", fmt.Errorf("%s.group_size: %d", field, *a.GroupSize)
		}
	}
	if w.strategy == "group" || w.strategy == "tensor_group" {
		if a.GroupSize == nil || *a.GroupSize <= 0 {
			return w, "", fmt.Errorf("%s.group_size: strategy %q needs a positive group_size", field, w.strategy)
		}
		w.groupSize = *a.GroupSize
	}
	var dyn string
	switch d := a.Dynamic.(type) {
	case nil, bool:
		if d == true {
			dyn = "true"
		}
	case string:
		dyn = strings.ToLower(d)
	default:
		return w, "", fmt.Errorf("%s.dynamic: %v", field, a.Dynamic)
	}
	return w, dyn, nil
}

// parseWeights resolves the weights' args.
func parseWeights(a *args, field string) (weights, error) {
	w, dyn, err := resolve(a, field)
	if err != nil {
		return w, err
	}
	if dyn != "" {
		return w, fmt.Errorf("%s.dynamic: %s; weights must be static", field, dyn)
	}
	switch w.strategy {
	case "tensor", "channel", "group", "tensor_group":
	case "block":
		var bs []int
		if json.Unmarshal(a.BlockStructure, &bs) != nil {
			// compressed-tensors also accepts "128x128".
			var s string
			var r, c int
			if json.Unmarshal(a.BlockStructure, &s) == nil {
				if n, _ := fmt.Sscanf(s, "%dx%d", &r, &c); n == 2 {
					bs = []int{r, c}
				}
			}
		}
		if len(bs) != 2 || bs[0] <= 0 || bs[1] <= 0 {
			return w, fmt.Errorf("%s.block_structure: %s, want [rows, cols]", field, a.BlockStructure)
		}
		w.block = [2]int{bs[0], bs[1]}
	default:
		return w, fmt.Errorf("%s.strategy: %q is not a weight strategy", field, w.strategy)
	}
	switch v := a.Actorder.(type) {
	case nil:
	case bool:
		if v {
			w.actorder = "group"
		}
	case string:
		w.actorder = map[string]string{"group": "group", "dynamic": "group", "weight": "weight", "static": "weight"}[strings.ToLower(v)]
		if w.actorder == "" {
			return w, fmt.Errorf("%s.actorder: %q", field, v)
		}
	default:
		return w, fmt.Errorf("%s.actorder: %v", field, a.Actorder)
	}
	if w.actorder != "" && w.strategy != "group" {
		return w, fmt.Errorf("%s.actorder: %q needs strategy \"group\", not %q", field, w.actorder, w.strategy)
	}
	return w, nil
}

// checkLayout refuses a weight quantization its format cannot store, or
// one this package does not read.
func checkLayout(g *group, field string) error {
	w := g.w
	switch g.format {
	case packQuantized:
		if w.float {
			return fmt.Errorf("%s: format %q holds int weights, not float", field, g.format)
		}
		switch w.bits {
		case 1, 2, 4, 8:
			// 32/bits codes per word: the layout before and after the 2026
			// change (dense bit packing across words) is the same.
		case 3, 5, 6, 7:
			return fmt.Errorf("%s.weights.num_bits: %d-bit pack-quantized packs differently before and after compressed-tensors' 2026 change (whole codes per int32 word, then codes straddling words), and a checkpoint does not say which; not supported", field, w.bits)
		default:
			return fmt.Errorf("%s.weights.num_bits: %d, want 1 to 8 for %q", field, w.bits, g.format)
		}
		if w.strategy == "tensor_group" {
			return fmt.Errorf("%s.weights.strategy: %q with %q", field, w.strategy, g.format)
		}
	case intQuantized, naiveQuantized, floatQuantized:
		if w.float && w.bits != 8 {
			return fmt.Errorf("%s.weights.num_bits: float %d-bit in %q; only FP8 E4M3 is stored unpacked", field, w.bits, g.format)
		}
		if !w.float && (w.bits < 1 || w.bits > 8) {
			return fmt.Errorf("%s.weights.num_bits: int %d-bit in %q, want 1 to 8 (stored as I8)", field, w.bits, g.format)
		}
		if w.float != (g.format == floatQuantized) && g.format != naiveQuantized {
			return fmt.Errorf("%s.weights.type: %s weights in format %q", field, map[bool]string{true: "float", false: "int"}[w.float], g.format)
		}
		if w.float && !w.symmetric {
			return fmt.Errorf("%s.weights.symmetric: false; FP8 weights are symmetric", field)
		}
		if w.strategy == "tensor_group" {
			return fmt.Errorf("%s.weights.strategy: %q with %q", field, w.strategy, g.format)
		}
	case nvfp4Packed:
		if !w.float || w.bits != 4 || w.strategy != "tensor_group" || w.groupSize != 16 || !w.symmetric {
			return fmt.Errorf("%s.weights: format %q needs float 4-bit symmetric tensor_group weights in groups of 16", field, g.format)
		}
	}
	return nil
}

// parseActs maps input_activations to Format.Acts' names: dynamic
// per-token int8 or FP8, or NVFP4's locally dynamic groups of 16.
func parseActs(a *args, field string) (string, error) {
	if a == nil {
		return "", nil
	}
	w, dyn, err := resolve(a, field)
	if err != nil {
		return "", err
	}
	switch {
	case !w.float && w.bits == 8 && w.strategy == "token" && dyn == "true" && w.symmetric:
		return "int8", nil
	case w.float && w.bits == 8 && w.strategy == "token" && dyn == "true" && w.symmetric:
		return "fp8", nil
	case w.float && w.bits == 4 && w.strategy == "tensor_group" && w.groupSize == 16 && dyn == "local" && w.symmetric:
		return "fp4", nil
	}
	kind := map[bool]string{true: "float", false: "int"}[w.float]
	return "", fmt.Errorf("%s: %s %d-bit, strategy %q, dynamic %q, symmetric %v is not supported (only dynamic symmetric per-token int8 or FP8, and NVFP4's local tensor_group of 16)", field, kind, w.bits, w.strategy, dyn, w.symmetric)
}
