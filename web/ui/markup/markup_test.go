package markup

import "testing"

func TestBuilder(t *testing.T) {
	var m Builder
	m.Open("span", "class", `agree"><img src=x onerror=alert(1)>`, "data-i", "3")
	m.Text("<script>&")
	m.Close("span")
	m.Empty("line", "x1", "1")
	m.Elem("small", `'quoted'`)
	want := `<span class="agree&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" data-i="3">&lt;script&gt;&amp;</span><line x1="1"/><small>&#39;quoted&#39;</small>`
	if got := m.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestBuilderRefusesNames(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(*Builder)
	}{
		{"tag with markup", func(m *Builder) { m.Open("a><script") }},
		{"attribute with space", func(m *Builder) { m.Open("a", "x onerror", "1") }},
		{"odd attributes", func(m *Builder) { m.Open("a", "class") }},
		{"empty tag", func(m *Builder) { m.Close("") }},
		{"digit first", func(m *Builder) { m.Empty("1a") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			var m Builder
			c.f(&m)
		})
	}
}
