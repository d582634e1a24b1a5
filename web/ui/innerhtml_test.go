package main

import (
	"html"
	"testing"

	"github.com/vugu/vugu"
)

func TestASCIIHTML(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain <b>ascii</b> &amp;", "plain <b>ascii</b> &amp;"},
		{"␣plague", "&#x2423;plague"},
		{"a→b 😀", "a&#x2192;b &#x1f600;"},
		{"cut \xe2\x90 off", "cut &#xfffd;&#xfffd; off"},
	} {
		got := asciiHTML(c.in)
		if got != c.want {
			t.Errorf("asciiHTML(%q) = %q, want %q", c.in, got, c.want)
		}
		// What the browser reads back is the text that was meant.
		if back := html.UnescapeString(got); back != html.UnescapeString(c.in) && c.in != "cut \xe2\x90 off" {
			t.Errorf("asciiHTML(%q) reads back as %q", c.in, back)
		}
	}
}

// builder is a component that builds one node with the given innerHTML
// and, when it has a child, the child as a nested component.
type builder struct {
	html  string
	child *builder
	node  *vugu.VGNode
}

func (b *builder) Build(*vugu.BuildIn) *vugu.BuildOut {
	b.node = &vugu.VGNode{Type: vugu.ElementNode, Data: "div"}
	b.node.SetInnerHTML(vugu.HTML(b.html))
	out := &vugu.BuildOut{Out: []*vugu.VGNode{b.node}}
	if b.child != nil {
		b.node.InnerHTML = nil
		text := &vugu.VGNode{Type: vugu.ElementNode, Data: "span"}
		text.SetInnerHTML(vugu.HTML(b.html))
		b.node.FirstChild = text
		text.NextSibling = &vugu.VGNode{Type: vugu.ElementNode, Component: b.child}
		out.Components = []vugu.Builder{b.child}
	}
	return out
}

// TestASCIIInnerHTMLWalksComponents: the rewrite reaches nested nodes and
// child components' output, the way domrender renders a build.
func TestASCIIInnerHTMLWalksComponents(t *testing.T) {
	child := &builder{html: "→ <b>ok</b>"}
	top := &builder{html: "␣time", child: child}
	env, err := vugu.NewBuildEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	asciiInnerHTML(env.RunBuild(top))
	if got := *top.node.FirstChild.InnerHTML; got != "&#x2423;time" {
		t.Errorf("nested node's innerHTML %q", got)
	}
	if got := *child.node.InnerHTML; got != "&#x2192; <b>ok</b>" {
		t.Errorf("child component's innerHTML %q", got)
	}
}
