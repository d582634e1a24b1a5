// Package variant stores quantized variants of a checkpoint: shards of at
// most 64 MiB and a sealed manifest.json that says where each tensor's
// bytes are, in which scheme, and the sha256 of every shard. Opening a
// variant verifies the seal and every shard, and refuses a mismatch.
package variant

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"logitscope/internal/quant"
)

// Format names this manifest layout.
const Format = "logitscope.variant/1"

// MaxShardBytes bounds a shard file, and so every piece of a tensor: it is
// also well under WebGPU's default 128 MiB binding limit.
const MaxShardBytes = 64 << 20

// SchemeF32 marks tensors kept in float32: norms, biases, and the
// matrices a Policy leaves out.
const SchemeF32 = "f32"

// Manifest is manifest.json.
type Manifest struct {
	Format    string  `json:"format"`
	Scheme    string  `json:"scheme"`
	GroupSize int     `json:"group_size"`
	Model     string  `json:"model_sha256"` // the source checkpoint's Fingerprint
	Policy    *Policy `json:"policy,omitempty"`
	// EXL3Sources are the files of a model exllamav3 converted that the
	// EXL3 layers were taken from, by base name, with their sha256;
	// absent when this package encoded them.
	EXL3Sources map[string]string `json:"exl3_sources,omitempty"`
	Tensors     []Piece           `json:"tensors"`
	Shards      []Shard           `json:"shards"`
	Seal        string            `json:"manifest_sha256"`
}

// Policy says which scheme each matrix of a variant takes, by Hugging Face
// tensor name. The first of Rules that matches a matrix decides its
// scheme; a matrix no rule matches takes the variant's scheme when Only
// matches it (or Only is empty) and Keep does not, else float32. Vectors
// always stay float32. Go regexp syntax (RE2), unanchored:
// "mlp\.experts\." matches every routed expert.
type Policy struct {
	Only  string `json:"only,omitempty"`
	Keep  string `json:"keep,omitempty"`
	Rules []Rule `json:"rules,omitempty"`
}

// Rule gives the matrices whose name Match matches the scheme Scheme: q8,
// q6, q4 or f32.
type Rule struct {
	Match  string `json:"match"`
	Scheme string `json:"scheme"`
}

// String is the rule as quantize --as takes it: REGEX=SCHEME.
func (r Rule) String() string { return r.Match + "=" + r.Scheme }

// ParseRule reads quantize's --as value REGEX=SCHEME. It splits at the
// last "=", since a scheme never holds one and a regexp may. Errors do
// not repeat s: the flag package names the value.
func ParseRule(s string) (Rule, error) {
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return Rule{}, errors.New(`want REGEX=SCHEME, e.g. 'self_attn\.=q8'`)
	}
	r := Rule{Match: s[:i], Scheme: s[i+1:]}
	if _, err := r.compile(); err != nil {
		return r, err
	}
	if r.Scheme != SchemeF32 {
		canon, _ := ParseScheme(r.Scheme) // compile checked it
		r.Scheme = string(canon)
	}
	return r, nil
}

// compile checks the rule's scheme and parses its pattern. An empty
// pattern is refused: it would give every matrix the rule's scheme, which
// is what --scheme says, and is more likely a missing pattern than meant.
func (r Rule) compile() (*regexp.Regexp, error) {
	if r.Scheme != SchemeF32 {
		if _, err := ParseScheme(r.Scheme); err != nil {
			return nil, fmt.Errorf("scheme %q: want q8, q6, q4, exl3-kK[-CODEBOOK] or f32", r.Scheme)
		}
	}
	if r.Match == "" {
		return nil, errors.New("empty regexp (use --scheme for every matrix)")
	}
	return regexp.Compile(r.Match)
}

// compiled is a policy's patterns parsed; an empty Only or Keep is nil.
type compiled struct {
	only, keep *regexp.Regexp
	rules      []*regexp.Regexp // Rules[i]'s pattern
	schemes    []string         // Rules[i]'s scheme
}

// compile parses the policy's patterns. On an error it returns the rules
// parsed so far, so that a caller ignoring the error still gets a policy
// that decides (for a policy Write or Open would have refused).
func (p *Policy) compile() (compiled, error) {
	var c compiled
	if p == nil {
		return c, nil
	}
	for _, f := range []struct {
		field string
		expr  string
		re    **regexp.Regexp
	}{{"only", p.Only, &c.only}, {"keep", p.Keep, &c.keep}} {
		if f.expr == "" {
			continue
		}
		var err error
		if *f.re, err = regexp.Compile(f.expr); err != nil {
			return c, fmt.Errorf("policy %s %q: %v", f.field, f.expr, err)
		}
	}
	for i, r := range p.Rules {
		re, err := r.compile()
		if err != nil {
			return c, fmt.Errorf("policy rules[%d] %q: %v", i, r.String(), err)
		}
		c.rules, c.schemes = append(c.rules, re), append(c.schemes, r.Scheme)
	}
	return c, nil
}

func (c compiled) rule(name string) int {
	return slices.IndexFunc(c.rules, func(re *regexp.Regexp) bool { return re.MatchString(name) })
}

func (c compiled) schemeOf(name string, s string) string {
	if i := c.rule(name); i >= 0 {
		return c.schemes[i]
	}
	if (c.only == nil || c.only.MatchString(name)) && (c.keep == nil || !c.keep.MatchString(name)) {
		return s
	}
	return SchemeF32
}

// RuleOf is the index of the rule that decides the matrix name's scheme, -1
// when none matches it (also for a nil policy).
func (p *Policy) RuleOf(name string) int {
	c, _ := p.compile() // checked when the policy was made or read
	return c.rule(name)
}

// SchemeOf is the scheme the policy gives the matrix name in a variant of
// scheme s: the first matching rule's, else s or f32 as Only and Keep say.
// A nil policy gives every matrix s.
func (p *Policy) SchemeOf(name string, s quant.Scheme) string {
	c, _ := p.compile() // checked when the policy was made or read
	return c.schemeOf(name, string(s))
}

// Quantizes says whether the policy quantizes the matrix name (in any
// scheme); a nil policy quantizes every matrix.
func (p *Policy) Quantizes(name string) bool {
	// Any scheme stands for the variant's: only f32 or not matters here.
	return p.SchemeOf(name, quant.Q8) != SchemeF32
}

// String describes the policy as the quantize flags that make it, --as in
// the order they apply.
func (p *Policy) String() string {
	if p == nil {
		return ""
	}
	var parts []string
	if p.Only != "" {
		parts = append(parts, fmt.Sprintf("--only %q", p.Only))
	}
	if p.Keep != "" {
		parts = append(parts, fmt.Sprintf("--keep %q", p.Keep))
	}
	for _, r := range p.Rules {
		parts = append(parts, fmt.Sprintf("--as %q", r.String()))
	}
	return strings.Join(parts, " ")
}

// Piece is a whole tensor, or rows [Rows[0], Rows[1]) of a matrix split
// so that no piece exceeds a shard. Its bytes are a quant blob (see
// package quant) or little-endian float32.
type Piece struct {
	Name   string `json:"name"`
	Scheme string `json:"scheme"` // the variant's scheme, f32, or one its policy's rules name
	Shape  []int  `json:"shape"`  // the whole tensor's shape
	Rows   [2]int `json:"rows"`
	Shard  string `json:"shard"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
}

// Shard is one shard file.
type Shard struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// cols is the length of one row: the product of all but the first dim.
func (p Piece) cols() int {
	n := 1
	for _, d := range p.Shape[1:] {
		n *= d
	}
	return n
}

// expectedLength is what the piece's bytes must measure for its scheme.
func (p Piece) expectedLength() (int64, error) {
	rows := p.Rows[1] - p.Rows[0]
	if p.Scheme == SchemeF32 {
		return int64(rows) * int64(p.cols()) * 4, nil
	}
	if f := EXL3(p.Scheme); f.K != 0 {
		// One piece, the whole layer: its Hadamards mix its rows.
		if len(p.Shape) != 2 || p.Rows != [2]int{0, p.Shape[0]} {
			return 0, fmt.Errorf("an %s piece holds a whole matrix, not rows %v of %v", p.Scheme, p.Rows, p.Shape)
		}
		return f.Bytes(p.Shape[1], p.Shape[0]), nil
	}
	s, err := quant.ParseScheme(p.Scheme)
	if err != nil {
		return 0, err
	}
	l, err := quant.NewLayout(s, rows, p.cols())
	if err != nil {
		return 0, err
	}
	return int64(l.Bytes()), nil
}

// check validates the manifest's structure (not the shard bytes): every
// piece inside a listed shard with the length its scheme implies, pieces
// of a tensor covering its rows in order, shard names plain file names.
func (m *Manifest) check() error {
	if m.Format != Format {
		return fmt.Errorf("format %q, want %q", m.Format, Format)
	}
	if canon, err := ParseScheme(m.Scheme); err != nil {
		return fmt.Errorf("scheme: %v", err)
	} else if string(canon) != m.Scheme {
		return fmt.Errorf("scheme %q, written %q", m.Scheme, canon)
	}
	if m.GroupSize != quant.GroupSize {
		return fmt.Errorf("group_size %d, this build reads %d", m.GroupSize, quant.GroupSize)
	}
	policy, err := m.Policy.compile()
	if err != nil {
		return err
	}
	shards := map[string]Shard{}
	for _, s := range m.Shards {
		if s.Name == "" || strings.ContainsAny(s.Name, `/\`) || s.Name == "." || s.Name == ".." {
			return fmt.Errorf("shard name %q is not a plain file name", s.Name)
		}
		if _, dup := shards[s.Name]; dup {
			return fmt.Errorf("shard %s listed twice", s.Name)
		}
		if s.Size < 0 {
			return fmt.Errorf("shard %s: size %d is negative", s.Name, s.Size)
		}
		shards[s.Name] = s
	}
	next := map[string]int{} // tensor → first row not yet covered
	shape := map[string][]int{}
	for i, p := range m.Tensors {
		where := fmt.Sprintf("tensors[%d] (%s)", i, p.Name)
		if !plausible(p.Shape) {
			return fmt.Errorf("%s: shape %v", where, p.Shape)
		}
		// Each piece is in the scheme the recorded policy gives its tensor,
		// as Write stores it, so that the policy that receipts, reports
		// and the page show describes the weights that ran.
		switch want := policy.schemeOf(p.Name, m.Scheme); {
		case len(p.Shape) == 1 && p.Scheme != SchemeF32:
			return fmt.Errorf("%s: scheme %q for a vector, which variants store in f32", where, p.Scheme)
		case len(p.Shape) > 1 && p.Scheme != want && m.Policy.String() == "":
			return fmt.Errorf("%s: scheme %q in a %s variant", where, p.Scheme, m.Scheme)
		case len(p.Shape) > 1 && p.Scheme != want:
			return fmt.Errorf("%s: scheme %q, but the policy %s gives it %s", where, p.Scheme, m.Policy, want)
		}
		if prev, ok := shape[p.Name]; ok && fmt.Sprint(prev) != fmt.Sprint(p.Shape) {
			return fmt.Errorf("%s: shape %v, an earlier piece says %v", where, p.Shape, prev)
		}
		shape[p.Name] = p.Shape
		if p.Rows[0] != next[p.Name] || p.Rows[1] <= p.Rows[0] || p.Rows[1] > p.Shape[0] {
			return fmt.Errorf("%s: rows %v, want a range starting at %d within %d rows", where, p.Rows, next[p.Name], p.Shape[0])
		}
		next[p.Name] = p.Rows[1]
		want, err := p.expectedLength()
		if err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		if p.Length != want {
			return fmt.Errorf("%s: length %d, %s rows %v of %v take %d bytes", where, p.Length, p.Scheme, p.Rows, p.Shape, want)
		}
		s, ok := shards[p.Shard]
		if !ok {
			return fmt.Errorf("%s: shard %q is not listed", where, p.Shard)
		}
		// Size and Length are non-negative here, so neither the test nor
		// the message can overflow.
		if p.Offset < 0 {
			return fmt.Errorf("%s: offset %d is negative", where, p.Offset)
		}
		if p.Offset > s.Size-p.Length {
			return fmt.Errorf("%s: bytes %s are outside %s (%d bytes)", where, byteRange(p.Offset, p.Length), s.Name, s.Size)
		}
	}
	for name, n := range next {
		if n != shape[name][0] {
			return fmt.Errorf("tensor %s: pieces cover rows [0, %d) of %d", name, n, shape[name][0])
		}
	}
	return m.checkTiling()
}

// checkTiling requires each shard's pieces to cover it exactly, as Write
// lays them out: a byte two pieces read would decode one tensor's weights
// as another's, and a byte no piece reads means the manifest does not
// describe the shard it seals. check has put every piece inside its shard.
func (m *Manifest) checkTiling() error {
	byShard := map[string][]int{} // shard → indices of its pieces
	for i, p := range m.Tensors {
		byShard[p.Shard] = append(byShard[p.Shard], i)
	}
	where := func(i int) string { return fmt.Sprintf("tensors[%d] (%s)", i, m.Tensors[i].Name) }
	for _, s := range m.Shards {
		idx := byShard[s.Name]
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(m.Tensors[a].Offset, m.Tensors[b].Offset) })
		var end int64 // the first byte not yet covered
		for k, i := range idx {
			p := m.Tensors[i]
			switch {
			case p.Offset < end:
				q := m.Tensors[idx[k-1]]
				return fmt.Errorf("shard %s: %s bytes %s overlap %s bytes %s",
					s.Name, where(i), byteRange(p.Offset, p.Length), where(idx[k-1]), byteRange(q.Offset, q.Length))
			case p.Offset > end && k == 0:
				return fmt.Errorf("shard %s: bytes [%d, %d) belong to no piece (before %s)", s.Name, end, p.Offset, where(i))
			case p.Offset > end:
				return fmt.Errorf("shard %s: bytes [%d, %d) belong to no piece (between %s and %s)",
					s.Name, end, p.Offset, where(idx[k-1]), where(i))
			}
			end = p.Offset + p.Length
		}
		switch {
		case end < s.Size && len(idx) == 0:
			return fmt.Errorf("shard %s: bytes [0, %d) belong to no piece", s.Name, s.Size)
		case end < s.Size:
			return fmt.Errorf("shard %s: bytes [%d, %d) belong to no piece (after %s)", s.Name, end, s.Size, where(idx[len(idx)-1]))
		}
	}
	return nil
}

// byteRange renders [off, off+n) for non-negative off and n; the end is
// summed in uint64, where two int64s cannot wrap.
func byteRange(off, n int64) string {
	return fmt.Sprintf("[%d, %d)", off, uint64(off)+uint64(n))
}

// plausible: positive dims whose product cannot overflow a byte count.
func plausible(shape []int) bool {
	n := int64(1)
	for _, d := range shape {
		if d <= 0 || d > 1<<40 {
			return false
		}
		if n *= int64(d); n > 1<<40 {
			return false
		}
	}
	return len(shape) > 0
}

// parse decodes and checks manifest bytes. Unknown fields are refused: a
// reader that skipped them could not honour what they say.
func parse(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}
