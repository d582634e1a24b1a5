package quant

import "fmt"

// GroupSize is the number of consecutive weights along a row that share one scale.
const GroupSize = 32

// Scheme names a quantization format.
type Scheme string

const (
	Q8 Scheme = "q8"
	Q6 Scheme = "q6"
	Q4 Scheme = "q4"
)

// Schemes lists every supported scheme, most precise first.
var Schemes = []Scheme{Q8, Q6, Q4}

// ParseScheme accepts the names used on the command line ("q8", "q6", "q4").
func ParseScheme(s string) (Scheme, error) {
	for _, sc := range Schemes {
		if string(sc) == s {
			return sc, nil
		}
	}
	return "", fmt.Errorf("quant: unknown scheme %q; valid: q8, q6, q4", s)
}

// Bits is the number of bits per quantized weight. It is also the number of
// u32 words per group, since a group holds 32 weights.
func (s Scheme) Bits() int {
	switch s {
	case Q8:
		return 8
	case Q6:
		return 6
	case Q4:
		return 4
	}
	return 0
}

// QMax is the largest |q|. The range is symmetric, leaving the most negative
// code unused, so that +amax and -amax quantize equally well.
func (s Scheme) QMax() int {
	switch s {
	case Q8:
		return 127
	case Q6:
		return 31
	case Q4:
		return 7
	}
	return 0
}

func (s Scheme) valid() error {
	if s.Bits() == 0 {
		_, err := ParseScheme(string(s))
		return err
	}
	return nil
}
