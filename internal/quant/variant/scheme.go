package variant

import (
	"fmt"
	"strings"

	"logitscope/internal/format/exl3"
	"logitscope/internal/quant"
)

// ParseScheme reads a variant's scheme: one of package quant's (q8, q6,
// q4), or an EXL3 format (exl3-k4, exl3-k6-mul1: exl3.ParseFormat), in
// its canonical spelling (exl3-k4-mcg).
func ParseScheme(s string) (quant.Scheme, error) {
	if strings.HasPrefix(s, "exl3-") {
		f, err := exl3.ParseFormat(s)
		return quant.Scheme(f.String()), err
	}
	if _, err := quant.ParseScheme(s); err != nil {
		return "", fmt.Errorf("unknown scheme %q; valid: q8, q6, q4, exl3-kK[-CODEBOOK] (K 1 to 8; CODEBOOK mcg, the default, mul1 or 3inst)", s)
	}
	return quant.Scheme(s), nil
}

// EXL3 is the EXL3 format a scheme names; K is 0 for any other.
func EXL3(scheme string) exl3.Format {
	if !strings.HasPrefix(scheme, "exl3-") {
		return exl3.Format{}
	}
	f, _ := exl3.ParseFormat(scheme)
	return f
}
