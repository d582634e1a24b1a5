package serve

import (
	"strconv"
	"strings"
)

// maxRanges is the most ranges one Range header may ask for; past it the
// header is ignored and the whole file is sent (see cleanRange).
const maxRanges = 16

// cleanRange prepares a Range header for http.ServeContent, for a file of
// size bytes. It returns the header to use, "" to drop it:
//
//   - a malformed header (or another unit) is dropped: net/http would
//     answer 416, but RFC 9110 §14.2 lets a server ignore Range, and a
//     full 200 is more useful to a confused client than an error;
//   - so is one with more than maxRanges ranges: each costs a part and a
//     seek, and nothing the page does asks for more than one;
//   - empty suffix ranges ("-0", the last zero bytes) are removed: net/http
//     answers them with a 206, an empty body and an inverted Content-Range.
//     When nothing else is asked for, the header becomes one that starts
//     at the end of the file, which ServeContent answers 416 with
//     "bytes */size" (after If-Range and the other conditions, as it must).
//   - on an empty file every range is unsatisfiable (RFC 9110 §14.1.1: a
//     suffix range of a zero-length representation too), but net/http
//     answers a suffix with a 206 and "bytes 0--1/0": the header becomes
//     "bytes=0-", which it answers 416.
//
// Satisfiability is otherwise left to ServeContent, which knows the size.
func cleanRange(h string, size int64) string {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return ""
	}
	var keep []string
	n := 0
	for _, ra := range strings.Split(spec, ",") {
		ra = strings.Trim(ra, " \t")
		if ra == "" {
			continue
		}
		if n++; n > maxRanges {
			return ""
		}
		first, last, ok := strings.Cut(ra, "-")
		first, last = strings.Trim(first, " \t"), strings.Trim(last, " \t")
		switch {
		case !ok:
			return ""
		case first == "":
			if !digits(last) {
				return ""
			}
			if strings.Trim(last, "0") == "" {
				continue // empty suffix
			}
		case !digits(first) || (last != "" && !digits(last)):
			return ""
		case last != "" && less(last, first):
			return ""
		}
		keep = append(keep, first+"-"+last)
	}
	switch {
	case n == 0:
		return ""
	case len(keep) == 0 || size == 0:
		return "bytes=" + strconv.FormatInt(size, 10) + "-"
	}
	return "bytes=" + strings.Join(keep, ",")
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
