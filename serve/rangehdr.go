package serve

import "strings"

// rangeSyntaxOK reports whether a Range header is a well-formed bytes
// range set. net/http answers 416 to a malformed one (or to another unit);
// RFC 9110 §14.2 lets a server ignore such a header, and a full 200 is
// more useful to a confused client than an error, so malformed headers
// are dropped before http.ServeContent sees them. Satisfiability is left
// to ServeContent, which knows the size.
func rangeSyntaxOK(h string) bool {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return false
	}
	any := false
	for _, ra := range strings.Split(spec, ",") {
		ra = strings.Trim(ra, " \t")
		if ra == "" {
			continue
		}
		first, last, ok := strings.Cut(ra, "-")
		first, last = strings.Trim(first, " \t"), strings.Trim(last, " \t")
		switch {
		case !ok:
			return false
		case first == "":
			if !digits(last) {
				return false
			}
		case !digits(first) || (last != "" && !digits(last)):
			return false
		case last != "" && less(last, first):
			return false
		}
		any = true
	}
	return any
}

func digits(s string) bool {
	if s == "" || len(s) > 18 { // stays within int64
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// less compares two decimal strings numerically.
func less(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
