package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzIDList: --stop accepts only non-negative ids, and the ids it
// accepts, written back as "a,b", parse to the same list.
func FuzzIDList(f *testing.F) {
	for _, s := range []string{"1,2", "1 2", "151645", "-1", "1,,2", " ", "x", "99999999999999999999", "+3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var l idList
		if err := l.Set(s); err != nil {
			return
		}
		parts := make([]string, len(l.ids))
		for i, id := range l.ids {
			if id < 0 {
				t.Fatalf("%q: accepted id %d", s, id)
			}
			parts[i] = strconv.Itoa(id)
		}
		var back idList
		if err := back.Set(strings.Join(parts, ",")); err != nil || !slices.Equal(back.ids, l.ids) {
			t.Fatalf("%q: %v written back parses as %v, %v", s, l.ids, back.ids, err)
		}
	})
}

// FuzzTakeIDs: takeIDs only joins runs of arguments (the flag's value and
// the bare ids after it) with commas: it drops, adds and reorders nothing,
// and what it joins after the value are non-negative integers.
func FuzzTakeIDs(f *testing.F) {
	for _, s := range []string{"--stop\x001\x002\x00prompt", "-stop\x00-1\x002", "--stop", "x\x00--stop\x001,2\x003", "--stop\x00--stop\x005"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		out := takeIDs(args, "stop")
		// Walk args beside out: a flag's value is the next argument, then
		// any ids that takeIDs joined to it, each a non-negative integer.
		j, value := 0, false
		for _, o := range out {
			if value {
				rest, ok := strings.CutPrefix(o, args[j])
				if !ok {
					t.Fatalf("%q: value %q does not start with %q", args, o, args[j])
				}
				j++
				for _, id := range strings.Split(rest, ",")[1:] {
					if !isUint(id) || args[j] != id {
						t.Fatalf("%q: took %q", args, id)
					}
					j++
				}
				value = false
				continue
			}
			if o != args[j] {
				t.Fatalf("%q: %q in place of %q", args, o, args[j])
			}
			j++
			value = (o == "--stop" || o == "-stop") && j < len(args)
		}
		if j != len(args) {
			t.Fatalf("%q became %q: %q dropped", args, out, args[j:])
		}
	})
}
