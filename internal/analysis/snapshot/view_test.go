package snapshot

import (
	"fmt"
	"net/url"
	"testing"
)

func TestViewQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  View
		any   bool
	}{
		{"", View{}, false},
		{"pos=12&tab=flips&zoom=8-40", View{Pos: 12, Tab: TabFlips, From: 8, To: 40}, true},
		{"pos=3", View{Pos: 3}, true},
		{"tab=routes", View{Tab: TabRoutes}, true},
		{"pos=-1&tab=bogus&zoom=9-9", View{}, false},
		{"zoom=a-b&pos=x", View{}, false},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, named := ViewQuery(q)
		if got != tc.want || named != tc.any {
			t.Errorf("%q: %+v %v, want %+v %v", tc.query, got, named, tc.want, tc.any)
		}
		if !tc.any {
			continue
		}
		back := url.Values{}
		got.SetQuery(back)
		if again, _ := ViewQuery(back); again != got {
			t.Errorf("%q: round trip %q gave %+v", tc.query, back.Encode(), again)
		}
	}
}

func ExampleView_SetQuery() {
	q := url.Values{}
	View{Pos: 12, Tab: TabFlips, From: 0, To: 64}.SetQuery(q)
	fmt.Println(q.Encode())
	// Output: pos=12&tab=flips&zoom=0-64
}
