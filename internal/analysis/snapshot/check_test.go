package snapshot

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/routing"
)

// goodDoc is Build's document for pair() as JSON, with texts.
func goodDoc(t testing.TB) string {
	ref, test := pair()
	d, err := Build(nil, Capture{Logits: ref, PromptIDs: []int{3}}, Capture{Logits: test}, nil, text)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestParseRefusesHostile: every value the page turns into markup, a class
// name or an index is checked, so a stored document cannot carry markup
// into an attribute or point the view outside its arrays. Each error names
// the field and the value.
func TestParseRefusesHostile(t *testing.T) {
	good := goodDoc(t)
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("the good document: %v", err)
	}
	refusesForged(t, good, []forgery{
		{"class markup", `"class":"agree"`, `"class":"agree\"><img src=x onerror=alert(1)>"`, `positions[0].class "agree\"><img`},
		{"class unknown", `"class":"clear"`, `"class":"bogus"`, `positions[2].class "bogus"`},
		{"class agree on a flip", `"class":"clear"`, `"class":"agree"`, `positions[2].class "agree"`},
		{"margin_of", `"margin_of":"runner_up"`, `"margin_of":"x y"`, `positions[0].margin_of "x y"`},
		{"criterion mode", `"mode":"sigma"`, `"mode":"<b>"`, `criterion.mode "<b>"`},
		{"sigma scope", `"sigma_scope":"position"`, `"sigma_scope":"everywhere"`, `criterion.sigma_scope "everywhere"`},
		{"position index", `"index":1,`, `"index":7,`, `positions[1].index 7`},
		{"token out of vocab", `"tokens":[0,0,0]`, `"tokens":[0,99,0]`, `tokens[1] 99`},
		{"negative prompt id", `"prompt_ids":[3]`, `"prompt_ids":[-1]`, `prompt_ids[0] -1`},
		{"ref choice out of vocab", `"ref_choice":0`, `"ref_choice":16`, `positions[0].ref_choice 16`},
		{"top-k id out of vocab", `"ref_top":[{"id":0`, `"ref_top":[{"id":1000`, `positions[0].ref_top[0].id 1000`},
		{"side rows", `"test":{"label":"","rows":3}`, `"test":{"label":"","rows":5}`, `test.rows 5`},
		{"first disagreement", `"first_disagreement":1`, `"first_disagreement":3`, `first_disagreement 3`},
		{"summary positions", `"positions":3,`, `"positions":4,`, `summary.positions 4`},
		{"text key", `"texts":{`, `"texts":{"x<y":"a",`, `texts key "x<y"`},
		{"created", `"kind":`, `"created":"<script>","kind":`, `created "<script>"`},
		{"gguf name", `"test":{"label":""`, `"test":{"gguf":{"name":"<b>.bin","types":{"Q4_K":1}},"label":""`, `test.gguf: name "<b>.bin"`},
		{"gguf sha256", `"test":{"label":""`, `"test":{"gguf":{"name":"a.gguf","sha256":"<b>","types":{"Q4_K":1}},"label":""`, `test.gguf: sha256 "<b>"`},
		{"gguf type", `"ref":{"label":""`, `"ref":{"gguf":{"name":"a.gguf","types":{"Q4_K\"><b>":1}},"label":""`, `ref.gguf: types: "Q4_K\"><b>" is not a ggml type`},
		{"gguf count", `"ref":{"label":""`, `"ref":{"gguf":{"name":"a.gguf","types":{"F32":0}},"label":""`, `ref.gguf: types[F32] 0`},
		{"gguf no types", `"ref":{"label":""`, `"ref":{"gguf":{"name":"a.gguf","types":{}},"label":""`, `ref.gguf: types: none`},
		{"hub format", `"test":{"label":""`, `"test":{"hub":{"format":""},"label":""`, `test.hub.format ""`},
		{"hub format control", `"test":{"label":""`, `"test":{"hub":{"format":"gptq\u0007"},"label":""`, `test.hub.format "gptq\a"`},
		{"hub sha256", `"ref":{"label":""`, `"ref":{"hub":{"format":"gptq 4-bit","sha256":"<b>"},"label":""`, `ref.hub.sha256 "<b>"`},
		{"duplicate key", `"kind":"logitscope.snapshot"`, `"kind":"logitscope.snapshot","kind":"logitscope.snapshot"`, `duplicate key "kind"`},
		{"duplicate nested key", `"class":"agree"`, `"class":"clear","class":"agree"`, `duplicate key "class"`},
		{"duplicate escaped key", `"kind":"logitscope.snapshot"`, `"kind":"logitscope.snapshot","\u006bind":"logitscope.snapshot"`, `duplicate key "kind"`},
	})
}

// forgery is a stored document good with its first from replaced by to,
// which Parse must refuse with an error containing want.
type forgery struct{ name, from, to, want string }

func refusesForged(t *testing.T, good string, forged []forgery) {
	t.Helper()
	for _, c := range forged {
		t.Run(c.name, func(t *testing.T) {
			bad := strings.Replace(good, c.from, c.to, 1)
			if bad == good {
				t.Fatalf("%q not in the document", c.from)
			}
			_, err := Parse([]byte(bad))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// moeDoc is Build's document for moePair() as JSON.
func moeDoc(t testing.TB) string {
	ref, test := moePair()
	d, err := Build(nil, Capture{Logits: ref}, Capture{Logits: test}, nil, text)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A document's routing is checked as its margins are: the change the page
// colours a position by must be the one its experts give, every expert
// fits the layout, and the counts are the positions'.
func TestParseRefusesHostileRouting(t *testing.T) {
	good := moeDoc(t)
	d, err := Parse([]byte(good))
	if err != nil {
		t.Fatalf("the good document: %v", err)
	}
	if rt := d.Report.Routing; rt == nil || rt.Summary.SetChanged != 1 || rt.Summary.OrderOnly != 1 || rt.Positions[2].Change != routing.Set {
		t.Fatalf("routing %+v", d.Report.Routing)
	}
	refusesForged(t, good, []forgery{
		{"change markup", `"change":"same"`, `"change":"same\"><b>"`, `routing.positions[0]: change "same\"><b>"`},
		{"change unknown", `"change":"set"`, `"change":"swap"`, `routing.positions[2]: change "swap"`},
		{"change hidden", `"change":"set"`, `"change":"same"`, `routing.positions[2]: change "same" (set layers [1], order layers []): its experts say "set"`},
		{"set layers", `"set_layers":[1]`, `"set_layers":[3]`, `routing.positions[2]: change "set" (set layers [3]`},
		{"expert range", `"test":[[0,2]`, `"test":[[0,4]`, `routing.positions[2].test[0]: [0 4]: want distinct experts below 4`},
		{"negative expert", `"ref":[[0,1],[2,3]],"test":[[0,1],[2,3]]`, `"ref":[[0,-1],[2,3]],"test":[[0,1],[2,3]]`, `routing.positions[0].ref[0]: [0 -1]`},
		{"expert twice", `"test":[[0,2]`, `"test":[[2,2]`, `routing.positions[2].test[0]: [2 2]`},
		{"top-k", `"test":[[0,2]`, `"test":[[0,2,3]`, `routing.positions[2].test[0]: 3 experts, top_k is 2`},
		{"layer count", `"ref":[[0,1],[2,3]],"test":[[0,1],[2,3]]`, `"ref":[[0,1]],"test":[[0,1],[2,3]]`, `routing.positions[0].ref: 1 layers, routing has 2`},
		{"layers", `"layers":[1,3]`, `"layers":[3,1]`, `routing: layers [3 1]`},
		{"experts", `"experts":4`, `"experts":1`, `routing: top_k 2: want 1 to the 1 experts`},
		{"summary", `"set_changed":1,"order_only":1`, `"set_changed":0,"order_only":1`, `routing.summary`},
		{"first change", `"first_set_change":2`, `"first_set_change":-1`, `routing.summary`},
	})
	short := strings.Replace(good, `{"change":"same","ref":[[0,1],[2,3]],"test":[[0,1],[2,3]]},`, ``, 1)
	if _, err := Parse([]byte(short)); err == nil || !strings.Contains(err.Error(), "routing: 2 positions, the report has 3 rows") {
		t.Errorf("a position short: %v", err)
	}
}

// TestParseKeepsText: token texts are data, not markup: Parse keeps them as
// they are and the page escapes them where it shows them.
func TestParseKeepsText(t *testing.T) {
	good := goodDoc(t)
	doc := strings.Replace(good, `"texts":{`, `"texts":{"0":"<script>alert(1)</script>",`, 1)
	doc = strings.Replace(doc, `"0":"a",`, ``, 1)
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if d.Text(0) != "<script>alert(1)</script>" {
		t.Errorf("text 0 = %q", d.Text(0))
	}
}

func TestParseRefusesTrailingData(t *testing.T) {
	if _, err := Parse([]byte(goodDoc(t) + ` {}`)); err == nil {
		t.Error("a document followed by another value parsed")
	}
}

func TestNoDuplicateKeys(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want string // "" for none
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, ""},
		{`{"a":"\"a\"","b":["a","a"]}`, ""},
		{`{"a":1,"a":2}`, `duplicate key "a"`},
		{`{"x":[{"a":1,"b":2,"a":3}]}`, `duplicate key "a"`},
		{`{"a\"b":1,"a\u0022b":2}`, `duplicate key "a\"b"`},
	} {
		err := noDuplicateKeys([]byte(c.doc))
		if c.want == "" && err != nil || c.want != "" && (err == nil || err.Error() != c.want) {
			t.Errorf("%s: got %v, want %q", c.doc, err, c.want)
		}
	}
}

func TestNoDuplicateKeysLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"inner":{"a":1,"b":2},`)
	for i := range 100 {
		fmt.Fprintf(&b, `"k%d":{"a":1},`, i)
	}
	ok := b.String() + `"a":1}`
	if err := noDuplicateKeys([]byte(ok)); err != nil {
		t.Errorf("100 distinct keys: %v", err)
	}
	for _, dup := range []string{`"k7":1}`, `"k99":1}`, `"inner":1}`} {
		if err := noDuplicateKeys([]byte(b.String() + dup)); err == nil {
			t.Errorf("%s after 100 keys: no error", dup)
		}
	}
}

// The model note, a panel's windows and the shared view are checked like
// the rest: a nature the page knows, windows inside the rows and in
// order, a view inside the positions.
func TestParseRefusesBadExtras(t *testing.T) {
	ref, test := pair()
	d, err := Build(nil, Capture{Logits: ref, Windows: [][]int{{5, 1}, {6, 2, 3}}}, Capture{Logits: test}, []int{1, 2, 3}, text)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Window{{0, 5, false}, {1, 6, false}}; !slices.Equal(d.Windows, want) {
		t.Fatalf("windows %v, want %v", d.Windows, want)
	}
	// Windows that each start with the BOS say so.
	bos, err := Build(nil, Capture{Logits: ref, Windows: [][]int{{9, 1}, {9, 2, 3}}, Prefix: 1}, Capture{Logits: test}, []int{1, 2, 3}, text)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Window{{0, 9, true}, {1, 9, true}}; !slices.Equal(bos.Windows, want) {
		t.Fatalf("windows %v, want %v", bos.Windows, want)
	}
	if d.Texts["6"] != "g" {
		t.Errorf("the window's first token has no text: %q", d.Texts)
	}
	d.Model = &Model{Nature: "synthetic", About: "random weights"}
	d.View = &View{Pos: 2, Tab: TabFlips, From: 1, To: 3}
	d.Conform = &Conform{Suite: "tiny", Case: "q4-greedy", Pair: 1, Pairs: 2, Failures: []string{"mean_kld 0.3 > max 0.1"}}
	data, _ := json.Marshal(d)
	good := string(data)
	if _, err := Parse(data); err != nil {
		t.Fatalf("the good document: %v", err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"nature", `"nature":"synthetic"`, `"nature":"<b>"`, `model: nature "<b>"`},
		{"window order", `{"pos":1,"token":6}`, `{"pos":0,"token":6}`, `windows[1].pos 0`},
		{"window past the rows", `{"pos":1,"token":6}`, `{"pos":3,"token":6}`, `windows[1].pos 3`},
		{"window token", `{"pos":1,"token":6}`, `{"pos":1,"token":16}`, `windows[1].token 16`},
		{"view pos", `"view":{"pos":2`, `"view":{"pos":3`, `view: pos 3`},
		{"view tab", `"tab":"flips"`, `"tab":"x\"y"`, `view: tab "x\"y"`},
		{"view zoom", `"from":1,"to":3`, `"from":3,"to":3`, `view: zoom 3-3`},
		{"view zoom end", `"from":1,"to":3`, `"from":1,"to":4`, `view: zoom 1-4`},
		{"conform case", `"case":"q4-greedy"`, `"case":""`, `conform: case ""`},
		{"conform pair past pairs", `"pair":1,"pairs":2`, `"pair":3,"pairs":2`, `pair 3 of 2`},
		{"conform pair 0", `"pair":1,"pairs":2`, `"pair":0,"pairs":2`, `pair 0 of 2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := strings.Replace(good, c.from, c.to, 1)
			if bad == good {
				t.Fatalf("%q not in the document", c.from)
			}
			if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	// Windows that do not account for the rows are left out, not trusted.
	d, _ = Build(nil, Capture{Logits: ref, Windows: [][]int{{5, 1, 2}}}, Capture{Logits: test}, nil, text)
	if d.Windows != nil {
		t.Errorf("windows of 2 rows for 3: %v", d.Windows)
	}
}
