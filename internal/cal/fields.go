package cal

import (
	"reflect"
	"slices"
	"strings"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// setFields are the fields SUPERSEDE SET assigns, with the kind of value
// each takes, and grainField the index of each in lethe.Grain: every field
// a supersede may set (grains.SettableFields) whose Go type has a CAL
// literal, read from the Grain's JSON names. A new grain field of such a
// type reaches CAL without a change here; metadata and embedding have no
// literal and are not settable in CAL.
var setFields, grainField = settable()

func settable() (map[string]ValueKind, map[string]int) {
	kinds, index := map[string]ValueKind{}, map[string]int{}
	t := reflect.TypeFor[lethe.Grain]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !slices.Contains(grains.SettableFields, name) {
			continue
		}
		switch {
		case f.Type.Kind() == reflect.String:
			kinds[name] = String
		case f.Type.Kind() == reflect.Float64:
			kinds[name] = Number
		case f.Type.Kind() == reflect.Bool:
			kinds[name] = Bool
		case f.Type == reflect.TypeFor[[]string]():
			kinds[name] = List
		default:
			continue
		}
		index[name] = i
	}
	return kinds, index
}

// GrainOf returns the grain a SUPERSEDE's assignments describe: every
// field not assigned is left at its zero value, which carries forward
// (the assigned ones are named by [SetFields], empty values included).
func GrainOf(set []Assign) lethe.Grain {
	var g lethe.Grain
	v := reflect.ValueOf(&g).Elem()
	for _, a := range set {
		i, ok := grainField[a.Field]
		if !ok {
			continue // Parse accepts no other field
		}
		f := v.Field(i)
		switch a.Value.Kind {
		case String:
			f.SetString(a.Value.Str)
		case Number:
			f.SetFloat(a.Value.Num)
		case Bool:
			f.SetBool(a.Value.Bool)
		case List:
			f.Set(reflect.ValueOf(slices.Clone(a.Value.List)))
		}
	}
	return g
}
