package main

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vugu/vugu"
)

// asciiInnerHTML rewrites every innerHTML of a build (vg-content, vg-html)
// so that it holds only ASCII, each other character as a numeric
// character reference. vugu's domrender (v0.4.0) cuts an innerHTML that
// does not fit what is left of its instruction buffer into chunks at byte
// offsets, and its JavaScript decodes each chunk on its own: a character
// cut at a chunk's end became two U+FFFD ("␣plague" showed as "��plague"
// wherever the buffer happened to fill). ASCII cannot be cut inside a
// character. Nodes built earlier and reused are already ASCII, and stay
// as they are.
func asciiInnerHTML(res *vugu.BuildResults) {
	var walkOut func(out *vugu.BuildOut)
	var walk func(n *vugu.VGNode)
	walk = func(n *vugu.VGNode) {
		for ; n != nil; n = n.NextSibling {
			if n.Component != nil {
				if out := res.ResultFor(n.Component); out != nil {
					walkOut(out)
				}
				continue
			}
			if n.InnerHTML != nil {
				if s := asciiHTML(*n.InnerHTML); s != *n.InnerHTML {
					n.InnerHTML = &s
				}
			}
			walk(n.FirstChild)
		}
	}
	walkOut = func(out *vugu.BuildOut) {
		for _, n := range out.Out {
			walk(n)
		}
	}
	walkOut(res.Out)
}

// asciiHTML is the markup s with every non-ASCII character written as
// "&#xHEX;", which HTML reads back as that character; invalid UTF-8 bytes
// become U+FFFD, as the browser's decoder would make them.
func asciiHTML(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
			continue
		}
		b.WriteString("&#x")
		b.WriteString(strconv.FormatInt(int64(r), 16))
		b.WriteByte(';')
	}
	return b.String()
}
