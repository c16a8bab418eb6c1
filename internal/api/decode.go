package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// readBody reads a JSON request body of at most limit bytes: 415 for
// another media type, 413 past the limit.
func readBody(c *gin.Context, limit int64) ([]byte, error) {
	ct := c.GetHeader("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return nil, apiError(CodeUnsupportedMediaType, "the body must be application/json", "send Content-Type: application/json")
	}
	if c.Request.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(limit)
	case err != nil:
		return nil, grains.Wrap(lethe.CodeInvalidArgument, "the body could not be read", err)
	case len(bytes.TrimSpace(b)) == 0:
		return nil, grains.Errorf(lethe.CodeInvalidArgument, "a JSON body is required")
	}
	return b, nil
}

func tooLarge(limit int64) error {
	return apiError(CodePayloadTooLarge, "the body exceeds "+strconv.FormatInt(limit, 10)+" bytes",
		"split a batch into smaller ones")
}

// decodeStrict decodes one JSON value into v: unknown fields, wrong types
// and trailing data are errors, and so is what encoding/json would
// silently repair (see checkJSON). So is JSON null, which encoding/json
// takes for "left out", except as the value of a top-level key that v's
// nullable method names (a supersede's fields, whose null is their empty
// value). The errors name fields, never values.
func decodeStrict(b []byte, v any) error {
	var nullable []string
	if n, ok := v.(interface{ nullable() []string }); ok {
		nullable = n.nullable()
	}
	err := checkJSON(b, nullable)
	var null *nullError
	if err != nil && !errors.As(err, &null) {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, b, reflect.TypeOf(v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return grains.Errorf(lethe.CodeInvalidArgument, "trailing data after the JSON value")
	}
	if null != nil {
		// After decoding, so that an unknown field, a wrong type or a
		// syntax error elsewhere is answered as such.
		return null.err()
	}
	return nil
}

// decode reads and strictly decodes the body into v.
func decode(c *gin.Context, limit int64, v any) ([]byte, error) {
	b, err := readBody(c, limit)
	if err != nil {
		return nil, err
	}
	return b, decodeStrict(b, v)
}

// checkJSON refuses what encoding/json accepts by changing it, before it
// does:
//
//   - invalid UTF-8 in the body, and \u escapes that are not UTF-16 (a lone
//     surrogate), which it replaces with U+FFFD (user ids "u\xc3" and
//     "u\xc4" would become one user);
//   - a key twice in one object, where the last would win;
//   - outside metadata, a key that is not lowercase ASCII: field names
//     are, and encoding/json matches them case-insensitively ("Subject"
//     would set subject, and {"subject":"a","Subject":"b"} store "b");
//   - null, which it decodes as the field left out ({"limit": null} would
//     be no limit, {"tags": null} no tags filter): as the body, a value or
//     an item, except as the value of a top-level key nullable names.
//     That error is a *nullError, which decodeStrict answers only once the
//     body decoded.
//
// It runs before decoding; syntax errors are left to the decoder.
func checkJSON(b []byte, nullable []string) error {
	if !utf8.Valid(b) {
		return grains.Errorf(lethe.CodeInvalidArgument, "the body is not valid UTF-8")
	}
	if err := checkEscapes(b); err != nil {
		return err
	}
	if err, ok := checkKeysFast(b, nullable); ok {
		return err
	}
	return checkKeys(b, nullable)
}

// nullError is a JSON null where the API takes none, at field (a JSON
// path: grains[2].tags[0]; "" for the body itself). Within a metadata
// object it names the metadata: its keys are data.
type nullError struct {
	field string
	body  bool
}

func (e *nullError) Error() string { return e.err().Error() }

const nullHint = "null never means left out: leave an optional field out"

// err is the error the API answers.
func (e *nullError) err() error {
	switch {
	case e.body:
		return grains.Errorf(lethe.CodeInvalidArgument, "the body must be an object, not null")
	case fieldName.MatchString(e.field):
		return &lethe.Error{Code: lethe.CodeInvalidArgument, Field: e.field, Message: "must not be null", Hint: nullHint}
	}
	return &lethe.Error{Code: lethe.CodeInvalidArgument, Message: "a value is null", Hint: nullHint}
}

// checkKeys is checkJSON's check of the keys and nulls, through
// encoding/json's tokens: any JSON, but a token and often a map per value
// (5.7 ms and 133,000 allocations for a batch of 1,000 grains).
// checkKeysFast answers the common bodies first.
func checkKeys(b []byte, nullable []string) error {
	type frame struct {
		obj, meta bool
		keys      map[string]struct{}
		key       bool   // an object expecting a key
		cur       string // an object's last key
		items     int    // an array's items so far
	}
	var stack []*frame
	done := func() { // a value ended
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].key = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if str, ok := tok.(string); ok && top != nil && top.obj && top.key {
			if _, dup := top.keys[str]; dup {
				return keyError(str, "repeated key")
			}
			if len(top.keys) < 1<<16 {
				top.keys[str] = struct{}{}
			}
			if !top.meta && !lowerASCII(str) {
				return keyError(str, "unknown field (field names are lowercase)")
			}
			top.key, top.cur = false, str
			continue
		}
		// A value starts, or a container ends.
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			done()
			continue
		}
		if top != nil && !top.obj {
			top.items++
		}
		switch t := tok.(type) {
		case json.Delim: // '{' or '['
			f := &frame{obj: t == '{', key: t == '{'}
			if f.obj {
				f.keys = map[string]struct{}{}
				f.meta = top != nil && top.obj && !top.meta && top.cur == "metadata"
			}
			stack = append(stack, f)
		case nil:
			if len(stack) == 1 && top.obj && slices.Contains(nullable, top.cur) {
				done()
				continue
			}
			e := &nullError{body: top == nil}
			var p []byte
			for _, f := range stack {
				if f.meta {
					break
				}
				p = appendPathStep(p, f.obj, f.cur, f.items-1)
			}
			e.field = string(p)
			return e
		default:
			done()
		}
	}
}

// appendPathStep appends a step of a JSON path to p: .key (or key first)
// in an object, [i] in an array.
func appendPathStep[S string | []byte](p []byte, obj bool, key S, i int) []byte {
	if !obj {
		p = append(p, '[')
		p = strconv.AppendInt(p, int64(i), 10)
		return append(p, ']')
	}
	if len(p) > 0 {
		p = append(p, '.')
	}
	return append(p, key...)
}

func keyError(key, msg string) error {
	if fieldName.MatchString(key) {
		return grains.FieldError(lethe.CodeInvalidArgument, key, msg)
	}
	return grains.Errorf(lethe.CodeInvalidArgument, "%s", msg)
}

func lowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// checkEscapes refuses \u escapes that do not encode a Unicode scalar
// value: a high surrogate not followed by a low one, or a lone low one.
func checkEscapes(b []byte) error {
	bad := grains.Errorf(lethe.CodeInvalidArgument, "a string holds a \\u escape that is not valid UTF-16 (a lone surrogate)")
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++ // an escaped character, possibly a backslash
			continue
		}
		r, ok := hex4(b[i+2:])
		if !ok {
			return nil // a syntax error the decoder reports
		}
		i += 5
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low must follow
			if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return bad
			}
			r2, ok := hex4(b[i+3:])
			if !ok || r2 < 0xdc00 || r2 > 0xdfff {
				return bad
			}
			i += 6
		case utf16.IsSurrogate(r):
			return bad
		}
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

var fieldName = regexp.MustCompile(`^[A-Za-z0-9_.\[\]-]{1,64}$`)

// jsonError turns a decoding error of b into t into a lethe error that
// names the field, never the value.
func jsonError(err error, b []byte, t reflect.Type) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return grains.Errorf(lethe.CodeInvalidArgument, "malformed JSON at byte %d", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return grains.Errorf(lethe.CodeInvalidArgument, "malformed JSON: unexpected end")
	case errors.As(err, &te):
		// Field is the JSON path, with the names of embedded Go structs.
		field := strings.ReplaceAll(te.Field, "GrainInput.", "")
		if field == "" || !fieldName.MatchString(field) {
			return grains.Errorf(lethe.CodeInvalidArgument, "the body must be a JSON object of the documented form")
		}
		return grains.FieldError(lethe.CodeInvalidArgument, field, "wrong type: want "+kindName(te.Type))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		if !fieldName.MatchString(name) {
			return grains.Errorf(lethe.CodeInvalidArgument, "unknown field")
		}
		return grains.FieldError(lethe.CodeInvalidArgument, name, "unknown field")
	}
	// Other decoding errors (a value's own UnmarshalJSON: a time that is
	// not an RFC 3339 string) may quote the value: name the field only.
	if field, ft := malformedField(b, t, ""); field != "" && fieldName.MatchString(field) {
		msg := "malformed value"
		if ft == reflect.TypeFor[time.Time]() {
			msg = "malformed value: want an RFC 3339 time string"
		}
		return &lethe.Error{Code: lethe.CodeInvalidArgument, Field: field, Message: msg, Err: err}
	}
	return grains.Wrap(lethe.CodeInvalidArgument, "a field has a malformed value", err)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// malformedField returns the JSON path (grains[2].created_at) and Go type
// of the first field of b that does not decode into its field of t, a
// struct or a pointer to one, or "" when it finds none. It runs only after
// decoding failed, to name the field of an error that encoding/json
// reports without one (an UnmarshalJSON's).
func malformedField(b []byte, t reflect.Type, prefix string) (string, reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return "", nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return "", nil
	}
	for _, sf := range reflect.VisibleFields(t) {
		if !sf.IsExported() || sf.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		raw, ok := m[name]
		if !ok || json.Unmarshal(raw, reflect.New(sf.Type).Interface()) == nil {
			continue
		}
		path := prefix + name
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if reflect.PointerTo(ft).Implements(unmarshalerType) {
			return path, ft
		}
		switch ft.Kind() {
		case reflect.Struct:
			if f, et := malformedField(raw, ft, path+"."); f != "" {
				return f, et
			}
		case reflect.Slice:
			var elems []json.RawMessage
			if json.Unmarshal(raw, &elems) == nil {
				for i, e := range elems {
					if json.Unmarshal(e, reflect.New(ft.Elem()).Interface()) == nil {
						continue
					}
					p := fmt.Sprintf("%s[%d]", path, i)
					if f, et := malformedField(e, ft.Elem(), p+"."); f != "" {
						return f, et
					}
					return p, ft.Elem()
				}
			}
		}
		return path, ft
	}
	return "", nil
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Pointer:
		return kindName(t.Elem())
	}
	return "another type"
}

// checkKeysFast is checkKeys for one JSON value whose keys hold no escape:
// a scan of the bytes, the keys compared as they are written, nulls found
// as they are read. ok is false
// when the body is anything else (a syntax error, data after the value, an
// escaped key, an object of more than keysMax keys, which it compares
// pairwise, nesting deeper than depthMax), and then only checkKeys
// answers. What checkKeysFast answers is what checkKeys would
// (TestCheckKeysFastAgreesWithTokens).
func checkKeysFast(b []byte, nullable []string) (err error, ok bool) {
	const depthMax, keysMax = 1000, 32
	var stackBuf [16]scanFrame
	var keysBuf [32][]byte
	stack, keys := stackBuf[:0], keysBuf[:0]
	i := 0
	space := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	// str reads the string at b[i] ('"'), returns its bytes between the
	// quotes and whether it holds an escape.
	str := func() (s []byte, escaped, ok bool) {
		start := i + 1
		for j := start; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				i = j + 1
				return b[start:j], escaped, true
			case c == '\\':
				escaped = true
				if j+1 >= len(b) {
					return nil, false, false
				}
				switch b[j+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					j++
				case 'u':
					if _, ok := hex4(b[j+2:]); !ok {
						return nil, false, false
					}
					j += 5
				default:
					return nil, false, false
				}
			case c < 0x20:
				return nil, false, false
			}
		}
		return nil, false, false
	}
	num := func() bool {
		j := i
		if j < len(b) && b[j] == '-' {
			j++
		}
		digits := func() bool {
			k := j
			for j < len(b) && '0' <= b[j] && b[j] <= '9' {
				j++
			}
			return j > k
		}
		switch {
		case j < len(b) && b[j] == '0':
			j++
		case !digits():
			return false
		}
		if j < len(b) && b[j] == '.' {
			j++
			if !digits() {
				return false
			}
		}
		if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
			j++
			if j < len(b) && (b[j] == '+' || b[j] == '-') {
				j++
			}
			if !digits() {
				return false
			}
		}
		i = j
		return true
	}
	// value reads one value at b[i], after its space; containers push a
	// frame and return, their contents read by the loop below. It sets
	// null for a null that nullable does not allow.
	lastKey := []byte(nil)
	null := false
	value := func() bool {
		space()
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == depthMax {
				return false
			}
			var top *scanFrame
			if n := len(stack); n > 0 {
				top = &stack[n-1]
			}
			f := scanFrame{obj: c == '{', keys: len(keys)}
			f.meta = f.obj && top != nil && top.obj && !top.meta && string(lastKey) == "metadata"
			stack = append(stack, f)
			i++
		case c == '"':
			if _, _, ok := str(); !ok {
				return false
			}
		case c == 'n':
			if len(b)-i < 4 || string(b[i:i+4]) != "null" {
				return false
			}
			i += 4
			if len(stack) != 1 || !stack[0].obj || !slices.Contains(nullable, string(keys[len(keys)-1])) {
				null = true
			}
		case c == 't' || c == 'f':
			for _, lit := range []string{"true", "false"} {
				if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
					i += len(lit)
					return true
				}
			}
			return false
		default:
			return num()
		}
		return true
	}
	if !value() {
		return nil, false
	}
	if null {
		return &nullError{body: true}, true
	}
	// first: the innermost container was just opened, so its first member
	// (or its end) comes next, not a comma.
	first := len(stack) > 0
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		space()
		if i >= len(b) {
			return nil, false
		}
		end := byte(']')
		if top.obj {
			end = '}'
		}
		if b[i] == end {
			i++
			keys = keys[:top.keys]
			stack = stack[:len(stack)-1]
			first = false
			continue
		}
		if !first {
			if b[i] != ',' {
				return nil, false
			}
			i++
			space()
		}
		if top.obj {
			if i >= len(b) || b[i] != '"' {
				return nil, false
			}
			k, escaped, ok := str()
			if !ok || escaped || len(keys)-top.keys >= keysMax {
				return nil, false
			}
			for _, seen := range keys[top.keys:] {
				if string(seen) == string(k) {
					return keyError(string(k), "repeated key"), true
				}
			}
			if !top.meta && !lowerASCII(string(k)) {
				return keyError(string(k), "unknown field (field names are lowercase)"), true
			}
			keys, lastKey = append(keys, k), k
			space()
			if i >= len(b) || b[i] != ':' {
				return nil, false
			}
			i++
		}
		if !top.obj {
			top.items++
		}
		n := len(stack)
		if !value() {
			return nil, false
		}
		if null {
			return &nullError{field: nullPath(stack, keys)}, true
		}
		first = len(stack) > n
	}
	space()
	return nil, i == len(b)
}

// scanFrame is an open object or array of checkKeysFast.
type scanFrame struct {
	obj, meta bool
	keys      int // the object's keys are keys[scanFrame.keys:]
	items     int // an array's items so far
}

// nullPath is the JSON path of the value checkKeysFast just read in the
// innermost of stack, up to a metadata object (its keys are data).
func nullPath(stack []scanFrame, keys [][]byte) string {
	var p []byte
	for d, f := range stack {
		if f.meta {
			break
		}
		var key []byte
		if f.obj {
			// An object's current key is its last: the one before its
			// child's keys, or the last of all for the innermost.
			end := len(keys)
			if d+1 < len(stack) {
				end = stack[d+1].keys
			}
			key = keys[end-1]
		}
		p = appendPathStep(p, f.obj, key, f.items-1)
	}
	return string(p)
}
