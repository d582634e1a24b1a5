package hub

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want ID
	}{
		{"hf:Qwen/Qwen2.5-0.5B-Instruct", ID{Repo: "Qwen/Qwen2.5-0.5B-Instruct", Revision: "main"}},
		{"Qwen/Qwen2.5-0.5B-Instruct", ID{Repo: "Qwen/Qwen2.5-0.5B-Instruct", Revision: "main"}},
		{"hf:org/m@v1.0", ID{Repo: "org/m", Revision: "v1.0"}},
		{"hf:org/m@refs/pr/1", ID{Repo: "org/m", Revision: "refs/pr/1"}},
		{"hf:org/m@0123456789abcdef0123456789abcdef01234567", ID{Repo: "org/m", Revision: "0123456789abcdef0123456789abcdef01234567"}},
		{"hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", ID{Repo: "bartowski/Qwen2.5-0.5B-Instruct-GGUF", Revision: "main", File: "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf"}},
		{"hf:org/m-GGUF/sub/x.GGUF@abc", ID{Repo: "org/m-GGUF", Revision: "abc", File: "sub/x.GGUF"}},
		{"hf:a_b/c.d_e", ID{Repo: "a_b/c.d_e", Revision: "main"}},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"hf:", "want ORG/NAME"},
		{"hf:gpt2", "want ORG/NAME"},
		{"hf:org/", `"" is not a repo name`},
		{"hf:-org/m", `"-org" is not a repo name`},
		{"hf:org/m.", `"m." is not a repo name`},
		{"hf:org/a--b", `"a--b" is not a repo name`},
		{"hf:org/a..b", `"a..b" is not a repo name`},
		{"hf:org/m w", `"m w" is not a repo name`},
		{"hf:org/" + strings.Repeat("m", 97), "is not a repo name"},
		{"hf:org/m@", `revision "": empty`},
		{"hf:org/m@a b", "not a git branch"},
		{"hf:org/m@../x", "not a git branch"},
		{"hf:org/m@refs/", "not a git branch"},
		{"hf:org/m@.", "not a git branch"},
		{"hf:org/m@refs/.x", "not a git branch"},
		{"hf:org/m/model.safetensors", "only a .gguf file runs by itself; name the repo (hf:org/m)"},
		{"hf:org/m/../x.gguf", `file "../x.gguf": not a file path`},
		{"hf:org/m//x.gguf", "not a file path"},
	} {
		_, err := Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.in) {
			t.Errorf("Parse(%q) = %v; want an error naming the id and saying %q", c.in, err, c.want)
		}
	}
}

// FuzzParse: whatever Parse accepts prints back to an id that parses the
// same, and names no path that could leave the cache's folders.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"hf:Qwen/Qwen2.5-0.5B-Instruct", "org/m@refs/pr/1", "hf:o/m/a/b.gguf@v1", "hf:o/m@", "o/../x", "hf:o/m@x@y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !strings.Contains(err.Error(), "hub id") {
				t.Fatalf("Parse(%q): error %q does not say it is about a hub id", s, err)
			}
			return
		}
		again, err := Parse(id.String())
		if err != nil || again != id {
			t.Fatalf("Parse(%q) = %+v, printed %q, parsed back as %+v, %v", s, id, id.String(), again, err)
		}
		for _, p := range append(strings.Split(id.Repo, "/"), strings.Split(id.Revision, "/")...) {
			if p == ".." || p == "." || p == "" {
				t.Fatalf("Parse(%q) = %+v: a path segment %q", s, id, p)
			}
		}
		if strings.Count(id.Repo, "/") != 1 {
			t.Fatalf("Parse(%q): repo %q is not ORG/NAME", s, id.Repo)
		}
	})
}

func TestURLs(t *testing.T) {
	id := ID{Repo: "org/m", Revision: "refs/pr/1"}
	if got, want := APIURL("https://hub.example/", id, true), "https://hub.example/api/models/org/m/revision/refs%2Fpr%2F1?blobs=true"; got != want {
		t.Errorf("APIURL = %s, want %s", got, want)
	}
	if got, want := ResolveURL("https://hub.example", "org/m", "v 1", "sub dir/a#b.gguf"), "https://hub.example/org/m/resolve/v%201/sub%20dir/a%23b.gguf"; got != want {
		t.Errorf("ResolveURL = %s, want %s", got, want)
	}
}

func TestNormalizeETag(t *testing.T) {
	for in, want := range map[string]string{`"abc"`: "abc", `W/"abc"`: "abc", "abc": "abc", ` "abc" `: "abc"} {
		if got := NormalizeETag(in); got != want {
			t.Errorf("NormalizeETag(%q) = %q, want %q", in, got, want)
		}
	}
}
