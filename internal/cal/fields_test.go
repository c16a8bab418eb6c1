package cal

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/lethe-io/lethe/internal/grains"
)

// TestSetFieldsFollowTheGrain: SUPERSEDE SET takes every field a supersede
// may set that has a CAL literal, and each assignment lands in the grain
// field of that JSON name with its value.
func TestSetFieldsFollowTheGrain(t *testing.T) {
	h := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, f := range grains.SettableFields {
		kind, ok := setFields[f]
		if !ok {
			if f != "metadata" && f != "embedding" {
				t.Errorf("SUPERSEDE SET does not take %s", f)
			}
			if _, err := Parse(fmt.Sprintf(`SUPERSEDE "%s" SET %s = "x"`, h, f)); err == nil {
				t.Errorf("SET %s parsed", f)
			}
			continue
		}
		ex := map[ValueKind]struct {
			lit  string
			want any
		}{
			String: {`"v-` + f + `"`, "v-" + f},
			Number: {"0.25", 0.25},
			Bool:   {"TRUE", true},
			List:   {`["a", "b"]`, []any{"a", "b"}},
		}[kind]
		lit, want := ex.lit, ex.want
		st, err := Parse(fmt.Sprintf(`SUPERSEDE "%s" SET %s = %s`, h, f, lit))
		if err != nil {
			t.Errorf("SET %s = %s: %v", f, lit, err)
			continue
		}
		sup := st.(*Supersede)
		if !slices.Equal(SetFields(sup.Set), []string{f}) {
			t.Errorf("SET %s: fields %v", f, SetFields(sup.Set))
		}
		b, err := json.Marshal(GrainOf(sup.Set))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m[f], want) {
			t.Errorf("SET %s = %s: the grain's %s is %#v, want %#v", f, lit, f, m[f], want)
		}
	}
	for _, f := range []string{"hash", "memory", "created_at", "superseded_by", "retrieval_count", "archived"} {
		if _, ok := setFields[f]; ok {
			t.Errorf("SUPERSEDE SET takes %s", f)
		}
	}
}
