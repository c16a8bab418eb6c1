package cal

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/internal/grains"
)

const h1 = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Statement
	}{
		{"history of", `HISTORY OF "` + h1 + `"`, &History{Hash: h1}},
		{"lowercase keywords and semicolon", `history of "` + h1 + `";`, &History{Hash: h1}},
		{"history where", "HISTORY WHERE Subject = \"john\"", &History{Subject: "john"}},
		{"forget", "\n  FORGET\t\"" + h1 + "\"\n", &Forget{Hash: h1}},
		{"supersede", `SUPERSEDE "` + h1 + `" SET object = "tea", confidence = 0.98, tags = ["updated", "x"], pinned = true, importance = -0`,
			&Supersede{Hash: h1, Set: []Assign{
				{"object", Value{Kind: String, Str: "tea"}},
				{"confidence", Value{Kind: Number, Num: 0.98}},
				{"tags", Value{Kind: List, List: []string{"updated", "x"}}},
				{"pinned", Value{Kind: Bool, Bool: true}},
				{"importance", Value{Kind: Number, Num: 0}},
			}}},
		{"supersede empty values", `SUPERSEDE "` + h1 + `" SET content = "", tags = []`,
			&Supersede{Hash: h1, Set: []Assign{{"content", Value{Kind: String}}, {"tags", Value{Kind: List, List: []string{}}}}}},
		{"recall all", "RECALL", &Recall{}},
		{"recall where", `RECALL WHERE subject = "john" AND relation = "likes" AND tag = "a" LIMIT 5`,
			&Recall{Where: []Cond{{"subject", "john"}, {"relation", "likes"}, {"tag", "a"}}, Limit: 5}},
		{"recall limit", "recall limit 1000", &Recall{Limit: 1000}},
		{"escapes", `HISTORY WHERE subject = "a\"b\\c\nd\te"`, &History{Subject: "a\"b\\c\nd\te"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse = %#v, want %#v", got, tt.want)
			}
			again, err := Parse(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("Parse(%q) = %#v, %v; want %#v", got.String(), again, err, got)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantPos string // "line:col" at the start of the message
		wantMsg string
	}{
		{"empty", "", "1:1", "expected HISTORY, FORGET, SUPERSEDE or RECALL, found end of input"},
		{"unknown verb", "SELECT *", "1:1", "found a word"},
		{"history nothing", "HISTORY", "1:8", "expected OF or WHERE"},
		{"short hash", `HISTORY OF "abc"`, "1:12", "64 lowercase hex"},
		{"unquoted hash", "HISTORY OF " + h1, "1:12", "expected a quoted grain hash, found a word"},
		{"unclosed", "HISTORY OF \"" + h1, "1:12", "string not closed"},
		{"second line", "HISTORY\n  OF 42", "2:6", "expected a quoted grain hash, found a number"},
		{"bad escape", `HISTORY WHERE subject = "a\qb"`, "1:27", "unknown escape"},
		{"history where other", `HISTORY WHERE object = "x"`, "1:15", "subject only"},
		{"empty subject", `HISTORY WHERE subject = " "`, "1:25", "selects nothing"},
		{"recall empty subject", `RECALL WHERE subject = ""`, "1:24", "subject is empty: leave the condition out"},
		{"recall blank user", `RECALL WHERE type = "fact" AND user_id = " "`, "1:42", "user_id is empty"},
		{"recall empty relation", `RECALL WHERE relation = ""`, "1:25", "relation is empty"},
		{"recall empty object", `RECALL WHERE object = "" LIMIT 5`, "1:23", "object is empty"},
		{"recall empty type", `RECALL WHERE type = ""`, "1:21", "type is empty: leave the condition out"},
		{"recall blank namespace", `RECALL WHERE namespace = " "`, "1:26", "namespace is empty"},
		{"trailing", `FORGET "` + h1 + `" "x"`, "1:75", "expected end of statement"},
		{"unknown set field", `SUPERSEDE "` + h1 + `" SET colour = "red"`, "1:82", "no such field"},
		{"twice", `SUPERSEDE "` + h1 + `" SET object = "a", OBJECT = "b"`, "1:96", "set twice"},
		{"number for string", `SUPERSEDE "` + h1 + `" SET object = 3`, "1:91", "takes a quoted string"},
		{"string for number", `SUPERSEDE "` + h1 + `" SET confidence = "high"`, "1:95", "takes a number"},
		{"bad bool", `SUPERSEDE "` + h1 + `" SET pinned = yes`, "1:91", "TRUE or FALSE"},
		{"bad list", `SUPERSEDE "` + h1 + `" SET tags = ["a" "b"]`, "1:94", `expected "," or "]"`},
		{"empty tag", `SUPERSEDE "` + h1 + `" SET tags = [""]`, "1:90", "tags[0] is empty"},
		{"blank tag", `SUPERSEDE "` + h1 + `" SET tags = ["a", " "]`, "1:95", "tags[1] is empty"},
		{"no set", `SUPERSEDE "` + h1 + `"`, "1:77", "expected SET, found end of input"},
		{"limit zero", "RECALL LIMIT 0", "1:14", "LIMIT is a whole number"},
		{"limit frac", "RECALL LIMIT 2.5", "1:14", "LIMIT is a whole number"},
		{"limit huge", "RECALL LIMIT 99999999999999999999999", "1:14", "LIMIT is a whole number"},
		{"where field", `RECALL WHERE content = "x"`, "1:14", "no such field"},
		{"where twice", `RECALL WHERE subject = "a" AND SUBJECT = "b"`, "1:32", "given twice"},
		{"stray char", "RECALL @", "1:8", "unexpected character"},
		{"lone minus", `SUPERSEDE "` + h1 + `" SET importance = -`, "1:95", "malformed number"},
		{"newline in string", "HISTORY WHERE subject = \"a\nb\"", "1:27", "newline in string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.in)
			var e *grains.Error
			if !errors.As(err, &e) || e.Code != grains.CodeInvalidArgument || e.Field != "cal" {
				t.Fatalf("Parse error = %v, want invalid_argument on field cal", err)
			}
			if !strings.HasPrefix(e.Message, tt.wantPos+": ") || !strings.Contains(e.Message, tt.wantMsg) {
				t.Fatalf("message = %q, want %s: ...%s...", e.Message, tt.wantPos, tt.wantMsg)
			}
			if _, perr := parse(tt.in); perr == nil || perr.syntax == nil || perr.syntax.Error() != e.Message {
				t.Fatalf("parse error %+v does not match Parse's message %q", perr, e.Message)
			}
		})
	}
}

// TestParseErrorsNeverQuote checks that an error message holds no byte of
// a personal value.
func TestParseErrorsNeverQuote(t *testing.T) {
	for _, in := range []string{`HISTORY WHERE subject = "zelda@example.org" junk`, `RECALL WHERE zelda = "x"`,
		`SUPERSEDE "` + h1 + `" SET object = zelda`, `zelda`, `HISTORY OF "zelda"`} {
		_, err := Parse(in)
		if err == nil || strings.Contains(strings.ToLower(err.Error()), "zelda") {
			t.Errorf("Parse(%q) error %v quotes the input", in, err)
		}
	}
}

func TestParseTooLarge(t *testing.T) {
	in := `HISTORY WHERE subject = "` + strings.Repeat("a", MaxLen) + `"`
	_, err := Parse(in)
	if grains.ErrorCode(err) != grains.CodeTooLarge {
		t.Fatalf("Parse of %d bytes: %v, want too_large", len(in), err)
	}
}

// FuzzParse checks that Parse never panics, that every error is a
// positioned invalid_argument (or too_large) within the input, and that a
// statement prints to CAL that parses back to the same statement.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`HISTORY OF "` + h1 + `"`,
		`history where subject = "john";`,
		`FORGET "` + h1 + `"`,
		`SUPERSEDE "` + h1 + `" SET object = "tea", confidence = 0.98, tags = ["updated"], pinned = FALSE`,
		`RECALL WHERE subject = "john" AND relation = "likes" LIMIT 10`,
		`RECALL`, `HISTORY OF "abc`, "SUPERSEDE \"\\q", `RECALL LIMIT -1.`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		st, perr := parse(in)
		if perr != nil {
			if se := perr.syntax; se != nil {
				if se.Offset < 0 || se.Offset > len(in) || se.Line < 1 || se.Col < 1 || se.Msg == "malformed statement" {
					t.Fatalf("position %+v outside the input of %d bytes", se, len(in))
				}
			} else if len(in) <= MaxLen {
				t.Fatalf("too_large for %d bytes", len(in))
			}
			if grains.ErrorCode(perr.wrap()) == "" {
				t.Fatal("no code")
			}
			return
		}
		out := st.String()
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) = %v, from %q", out, err, in)
		}
		if !reflect.DeepEqual(again, st) {
			t.Fatalf("round trip: %#v != %#v", again, st)
		}
	})
}
