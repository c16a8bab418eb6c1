package grains

import "testing"

// A recall's tags filter every grain by each tag: an empty or blank tag
// is refused, naming it, never dropped (dropped, ["", ""] would be no
// filter at all).
func TestQueryRefusesEmptyTags(t *testing.T) {
	for _, tc := range []struct {
		tags  []string
		field string
	}{
		{[]string{""}, "tags[0]"},
		{[]string{"a", " "}, "tags[1]"},
		{[]string{"a", "b", "\t"}, "tags[2]"},
		{[]string{"a", "A"}, ""},
		{nil, ""},
	} {
		q := Query{Tags: tc.tags}
		q.Normalize()
		err := q.Validate()
		var field string
		if e, ok := err.(*Error); ok {
			field = e.Field
			if e.Code != CodeInvalidArgument {
				t.Errorf("tags %q: code %s", tc.tags, e.Code)
			}
		} else if err != nil {
			t.Errorf("tags %q: %v", tc.tags, err)
		}
		if field != tc.field {
			t.Errorf("tags %q: refused on %q, want %q", tc.tags, field, tc.field)
		}
	}
}

// A text search for only white space is refused, naming query, as the API
// refuses it: it searched for nothing and found nothing, where "" (no
// search) finds every grain.
func TestQueryRefusesBlankText(t *testing.T) {
	for _, tc := range []struct {
		text    string
		wantErr bool
	}{
		{"", false},
		{"tea", false},
		{" tea ", false},
		{" ", true},
		{"\t\n", true},
	} {
		q := Query{Text: tc.text}
		q.Normalize()
		err := q.Validate()
		e, ok := err.(*Error)
		switch {
		case tc.wantErr && (!ok || e.Code != CodeInvalidArgument || e.Field != "query"):
			t.Errorf("text %q: %v, want invalid_argument on query", tc.text, err)
		case !tc.wantErr && err != nil:
			t.Errorf("text %q: %v", tc.text, err)
		}
	}
}
