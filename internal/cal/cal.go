// Package cal parses the subset of CAL, Areev's context access language,
// that lethe answers: version history and the statements that read,
// correct and forget grains.
//
// # Grammar
//
// Keywords are case-insensitive; field names are lowercase or not, the
// same field. Strings are double-quoted, with \" \\ \n \t \r escapes. One
// statement per input, optionally ended by ";".
//
//	statement = history | forget | supersede | recall [ ";" ] .
//	history   = "HISTORY" ( "OF" string | "WHERE" "subject" "=" string ) .
//	forget    = "FORGET" string .
//	supersede = "SUPERSEDE" string "SET" assign { "," assign } .
//	assign    = field "=" value .
//	value     = string | number | "TRUE" | "FALSE" | "[" [ string { "," string } ] "]" .
//	recall    = "RECALL" [ "WHERE" cond { "AND" cond } ] [ "LIMIT" integer ] .
//	cond      = field "=" string .
//
// SUPERSEDE sets every field a supersede may set ([grains.SettableFields])
// that has a CAL literal, read from the grain's JSON names: today type,
// subject, relation, object, content, namespace, scope, user_id (strings),
// importance, confidence and salience (numbers), tags (a list) and pinned
// (TRUE or FALSE); metadata and embedding have none. A field SET names takes its
// value, empty included (content = "" clears the content, tags = [] the
// tags, confidence = 0 sets 0; an empty item of a list, tags = [""], is
// refused); the others carry forward, type included. RECALL WHERE filters on type,
// subject, relation, object, namespace, scope, user_id and tag (each tag
// condition adds a tag every grain must carry).
//
// # Errors
//
// Every error of [Parse] is a lethe error with code invalid_argument and
// field "cal", whose message starts with the line and column (both from
// 1, columns in bytes) of the offending byte; it never quotes the input,
// which may hold personal data. [SyntaxError] is the position and reason.
// Inputs past [MaxLen] bytes are refused whole, with code too_large.
package cal

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lethe-io/lethe/internal/grains"
)

// MaxLen bounds a CAL input, in bytes.
const MaxLen = 64 << 10

// Statement is a parsed CAL statement: *History, *Forget, *Supersede or
// *Recall. String gives it back in canonical form, which parses to an
// equal statement.
type Statement interface {
	String() string
	statement()
}

// History is HISTORY OF "<hash>" (Hash set) or HISTORY WHERE subject =
// "..." (Subject set).
type History struct {
	Hash    string
	Subject string
}

// Forget is FORGET "<hash>".
type Forget struct {
	Hash string
}

// Supersede is SUPERSEDE "<hash>" SET field = value, ...: Set in the
// order written, each field at most once.
type Supersede struct {
	Hash string
	Set  []Assign
}

// Recall is RECALL [WHERE field = "..." AND ...] [LIMIT n]; Limit 0 means
// the library's default.
type Recall struct {
	Where []Cond
	Limit int
}

// Assign is one field = value of SUPERSEDE.
type Assign struct {
	Field string
	Value Value
}

// Cond is one field = "value" of RECALL WHERE.
type Cond struct {
	Field string
	Value string
}

// ValueKind says which of Value's fields holds the value.
type ValueKind int

// The kinds of value.
const (
	String ValueKind = iota
	Number
	Bool
	List
)

// Value is the right side of an assignment.
type Value struct {
	Kind ValueKind
	Str  string
	Num  float64
	Bool bool
	List []string
}

func (*History) statement()   {}
func (*Forget) statement()    {}
func (*Supersede) statement() {}
func (*Recall) statement()    {}

// Fields RECALL WHERE accepts (SUPERSEDE SET's are setFields).
var (
	whereFields = map[string]bool{
		"type": true, "subject": true, "relation": true, "object": true, "namespace": true,
		"scope": true, "user_id": true, "tag": true,
	}
)

// SyntaxError says where and why an input is not CAL. Msg never quotes
// the input.
type SyntaxError struct {
	Offset    int // byte offset from 0
	Line, Col int // from 1; Col counts bytes
	Msg       string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// Parse parses one CAL statement. Its errors are *grains.Error with code
// invalid_argument and field "cal" whose message is a *SyntaxError's, or
// too_large.
func Parse(src string) (Statement, error) {
	st, err := parse(src)
	if err != nil {
		return nil, err.wrap()
	}
	return st, nil
}

// parseError is an error of parse: a syntax error, or too large.
type parseError struct {
	syntax   *SyntaxError
	tooLarge bool
}

func (e *parseError) wrap() error {
	if e.tooLarge {
		return grains.FieldError(grains.CodeTooLarge, "cal", "a statement is at most 65536 bytes")
	}
	return &grains.Error{Code: grains.CodeInvalidArgument, Field: "cal", Message: e.syntax.Error(),
		Hint: "see the CAL grammar in docs/api.md"}
}

// parse is Parse, its errors unwrapped.
func parse(src string) (Statement, *parseError) {
	if len(src) > MaxLen {
		return nil, &parseError{tooLarge: true}
	}
	p := &parser{src: src}
	st, err := p.statement()
	if err != nil {
		se, ok := err.(*SyntaxError)
		if !ok {
			se = &SyntaxError{Line: 1, Col: 1, Msg: "malformed statement"} // every parser error is one; never reached
		}
		return nil, &parseError{syntax: se}
	}
	return st, nil
}

// token kinds.
type kind int

const (
	tEOF kind = iota
	tIdent
	tString
	tNumber
	tEq
	tComma
	tSemi
	tLBrack
	tRBrack
)

var kindName = [...]string{tEOF: "end of input", tIdent: "a word", tString: "a string", tNumber: "a number",
	tEq: `"="`, tComma: `","`, tSemi: `";"`, tLBrack: `"["`, tRBrack: `"]"`}

type token struct {
	kind kind
	pos  int
	text string // an identifier as written, a string unquoted, a number as written
}

type parser struct {
	src  string
	pos  int // next byte to scan
	tok  token
	peek bool // tok holds a token not yet consumed
}

// errAt is a syntax error at byte offset off.
func (p *parser) errAt(off int, format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < off && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Offset: off, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// next returns the next token.
func (p *parser) next() (token, error) {
	if p.peek {
		p.peek = false
		return p.tok, nil
	}
	t, err := p.scan()
	p.tok = t
	return t, err
}

// unread makes the last token from next the next one again.
func (p *parser) unread() { p.peek = true }

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func (p *parser) scan() (token, error) {
	for p.pos < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.pos]) >= 0 {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := p.src[p.pos]
	single := map[byte]kind{'=': tEq, ',': tComma, ';': tSemi, '[': tLBrack, ']': tRBrack}
	if k, ok := single[c]; ok {
		p.pos++
		return token{kind: k, pos: start}, nil
	}
	switch {
	case isLetter(c):
		for p.pos < len(p.src) && (isLetter(p.src[p.pos]) || isDigit(p.src[p.pos])) {
			p.pos++
		}
		return token{kind: tIdent, pos: start, text: p.src[start:p.pos]}, nil
	case isDigit(c) || c == '-' || c == '.':
		if c == '-' {
			p.pos++
		}
		digits := 0
		for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
			p.pos++
			digits++
		}
		if p.pos < len(p.src) && p.src[p.pos] == '.' {
			p.pos++
			for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
				p.pos++
				digits++
			}
		}
		if digits == 0 {
			return token{}, p.errAt(start, "malformed number")
		}
		return token{kind: tNumber, pos: start, text: p.src[start:p.pos]}, nil
	case c == '"':
		return p.scanString()
	}
	return token{}, p.errAt(start, "unexpected character")
}

// scanString scans a double-quoted string at p.pos.
func (p *parser) scanString() (token, error) {
	start := p.pos
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.src) {
			return token{}, p.errAt(start, "string not closed")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			return token{kind: tString, pos: start, text: b.String()}, nil
		case c == '\n':
			return token{}, p.errAt(p.pos, "newline in string")
		case c == '\\':
			if p.pos+1 >= len(p.src) {
				return token{}, p.errAt(start, "string not closed")
			}
			e, ok := map[byte]byte{'"': '"', '\\': '\\', 'n': '\n', 't': '\t', 'r': '\r'}[p.src[p.pos+1]]
			if !ok {
				return token{}, p.errAt(p.pos, `unknown escape (use \" \\ \n \t \r)`)
			}
			b.WriteByte(e)
			p.pos += 2
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
}

// describe names a token for an error without quoting the input: keywords
// and field names are the language's, anything else is named by kind.
func describe(t token) string {
	if t.kind == tIdent {
		if w := strings.ToUpper(t.text); keywords[w] {
			return w
		}
		return "a word"
	}
	return kindName[t.kind]
}

var keywords = map[string]bool{"HISTORY": true, "OF": true, "WHERE": true, "FORGET": true, "SUPERSEDE": true,
	"SET": true, "RECALL": true, "AND": true, "LIMIT": true, "TRUE": true, "FALSE": true}

// expect consumes a token of kind k.
func (p *parser) expect(k kind, what string) (token, error) {
	t, err := p.next()
	if err != nil {
		return t, err
	}
	if t.kind != k {
		return t, p.errAt(t.pos, "expected %s, found %s", what, describe(t))
	}
	return t, nil
}

// keyword consumes the keyword kw.
func (p *parser) keyword(kw string) error {
	t, err := p.next()
	if err != nil {
		return err
	}
	if t.kind != tIdent || !strings.EqualFold(t.text, kw) {
		return p.errAt(t.pos, "expected %s, found %s", kw, describe(t))
	}
	return nil
}

// isKeyword reports whether the next token is kw, consuming it if so.
func (p *parser) isKeyword(kw string) (bool, error) {
	t, err := p.next()
	if err != nil {
		return false, err
	}
	if t.kind == tIdent && strings.EqualFold(t.text, kw) {
		return true, nil
	}
	p.unread()
	return false, nil
}

func (p *parser) statement() (Statement, error) {
	t, err := p.next()
	if err != nil {
		return nil, err
	}
	if t.kind != tIdent {
		return nil, p.errAt(t.pos, "expected HISTORY, FORGET, SUPERSEDE or RECALL, found %s", describe(t))
	}
	var st Statement
	switch strings.ToUpper(t.text) {
	case "HISTORY":
		st, err = p.history()
	case "FORGET":
		var h string
		if h, err = p.hash(); err == nil {
			st = &Forget{Hash: h}
		}
	case "SUPERSEDE":
		st, err = p.supersede()
	case "RECALL":
		st, err = p.recall()
	default:
		return nil, p.errAt(t.pos, "expected HISTORY, FORGET, SUPERSEDE or RECALL, found %s", describe(t))
	}
	if err != nil {
		return nil, err
	}
	if t, err = p.next(); err != nil {
		return nil, err
	}
	if t.kind == tSemi {
		if t, err = p.next(); err != nil {
			return nil, err
		}
	}
	if t.kind != tEOF {
		return nil, p.errAt(t.pos, "expected end of statement, found %s", describe(t))
	}
	return st, nil
}

// hash reads a quoted grain hash.
func (p *parser) hash() (string, error) {
	t, err := p.expect(tString, "a quoted grain hash")
	if err != nil {
		return "", err
	}
	if !grains.ValidHash(t.text) {
		return "", p.errAt(t.pos, "a grain hash is 64 lowercase hex digits")
	}
	return t.text, nil
}

func (p *parser) history() (Statement, error) {
	t, err := p.next()
	if err != nil {
		return nil, err
	}
	switch {
	case t.kind == tIdent && strings.EqualFold(t.text, "OF"):
		h, err := p.hash()
		if err != nil {
			return nil, err
		}
		return &History{Hash: h}, nil
	case t.kind == tIdent && strings.EqualFold(t.text, "WHERE"):
		f, err := p.expect(tIdent, "subject")
		if err != nil {
			return nil, err
		}
		if !strings.EqualFold(f.text, "subject") {
			return nil, p.errAt(f.pos, "HISTORY WHERE filters on subject only")
		}
		if _, err := p.expect(tEq, `"="`); err != nil {
			return nil, err
		}
		v, err := p.expect(tString, "a quoted subject")
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(v.text) == "" {
			return nil, p.errAt(v.pos, "an empty subject selects nothing")
		}
		return &History{Subject: v.text}, nil
	}
	return nil, p.errAt(t.pos, "expected OF or WHERE, found %s", describe(t))
}

// field reads a field name, lowercased, and checks it against known.
func (p *parser) field(known func(string) bool, stmt string) (string, int, error) {
	t, err := p.expect(tIdent, "a field name")
	if err != nil {
		return "", 0, err
	}
	f := strings.ToLower(t.text)
	if !known(f) {
		return "", 0, p.errAt(t.pos, "%s has no such field", stmt)
	}
	return f, t.pos, nil
}

func (p *parser) supersede() (Statement, error) {
	h, err := p.hash()
	if err != nil {
		return nil, err
	}
	if err := p.keyword("SET"); err != nil {
		return nil, err
	}
	st := &Supersede{Hash: h}
	seen := map[string]bool{}
	for {
		f, pos, err := p.field(func(f string) bool { _, ok := setFields[f]; return ok }, "SUPERSEDE SET")
		if err != nil {
			return nil, err
		}
		if seen[f] {
			return nil, p.errAt(pos, "field %s set twice", f)
		}
		seen[f] = true
		if _, err := p.expect(tEq, `"="`); err != nil {
			return nil, err
		}
		v, err := p.value(setFields[f], f)
		if err != nil {
			return nil, err
		}
		st.Set = append(st.Set, Assign{Field: f, Value: v})
		t, err := p.next()
		if err != nil {
			return nil, err
		}
		if t.kind != tComma {
			p.unread()
			return st, nil
		}
	}
}

// value reads the value of field f, of kind want.
func (p *parser) value(want ValueKind, f string) (Value, error) {
	t, err := p.next()
	if err != nil {
		return Value{}, err
	}
	switch want {
	case String:
		if t.kind != tString {
			return Value{}, p.errAt(t.pos, "%s takes a quoted string, found %s", f, describe(t))
		}
		return Value{Kind: String, Str: t.text}, nil
	case Number:
		if t.kind != tNumber {
			return Value{}, p.errAt(t.pos, "%s takes a number, found %s", f, describe(t))
		}
		n, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return Value{}, p.errAt(t.pos, "malformed number")
		}
		if n == 0 {
			n = 0 // no negative zero: it would print as -0
		}
		return Value{Kind: Number, Num: n}, nil
	case Bool:
		if t.kind == tIdent && (strings.EqualFold(t.text, "TRUE") || strings.EqualFold(t.text, "FALSE")) {
			return Value{Kind: Bool, Bool: strings.EqualFold(t.text, "TRUE")}, nil
		}
		return Value{}, p.errAt(t.pos, "%s takes TRUE or FALSE, found %s", f, describe(t))
	}
	if t.kind != tLBrack {
		return Value{}, p.errAt(t.pos, `%s takes a list ["...", ...], found %s`, f, describe(t))
	}
	v := Value{Kind: List, List: []string{}}
	if t, err = p.next(); err != nil {
		return Value{}, err
	}
	if t.kind == tRBrack {
		return v, nil
	}
	for {
		if t.kind != tString {
			return Value{}, p.errAt(t.pos, "expected a quoted string, found %s", describe(t))
		}
		if strings.TrimSpace(t.text) == "" {
			// The library refuses it too (grains.CheckTags); here it is
			// refused where it was written.
			return Value{}, p.errAt(t.pos, "%s[%d] is empty: each item is a non-empty string", f, len(v.List))
		}
		v.List = append(v.List, t.text)
		if t, err = p.next(); err != nil {
			return Value{}, err
		}
		if t.kind == tRBrack {
			return v, nil
		}
		if t.kind != tComma {
			return Value{}, p.errAt(t.pos, `expected "," or "]", found %s`, describe(t))
		}
		if t, err = p.next(); err != nil {
			return Value{}, err
		}
	}
}

func (p *parser) recall() (Statement, error) {
	st := &Recall{}
	where, err := p.isKeyword("WHERE")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for where {
		f, pos, err := p.field(func(f string) bool { return whereFields[f] }, "RECALL WHERE")
		if err != nil {
			return nil, err
		}
		if seen[f] && f != "tag" {
			return nil, p.errAt(pos, "field %s given twice (only tag may repeat)", f)
		}
		seen[f] = true
		if _, err := p.expect(tEq, `"="`); err != nil {
			return nil, err
		}
		v, err := p.expect(tString, "a quoted value")
		if err != nil {
			return nil, err
		}
		if slices.Contains(grains.NonEmptyFilters, f) && strings.TrimSpace(v.text) == "" {
			return nil, p.errAt(v.pos, "%s is empty: leave the condition out to match every value", f)
		}
		st.Where = append(st.Where, Cond{Field: f, Value: v.text})
		if where, err = p.isKeyword("AND"); err != nil {
			return nil, err
		}
	}
	limit, err := p.isKeyword("LIMIT")
	if err != nil || !limit {
		return st, err
	}
	t, err := p.expect(tNumber, "a number")
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(t.text)
	if err != nil || n < 1 || n > grains.MaxLimit {
		return nil, p.errAt(t.pos, "LIMIT is a whole number from 1 to %d", grains.MaxLimit)
	}
	st.Limit = n
	return st, nil
}

// quote writes s as a CAL string.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\r", `\r`)
	return `"` + r.Replace(s) + `"`
}

func (h *History) String() string {
	if h.Subject != "" {
		return "HISTORY WHERE subject = " + quote(h.Subject)
	}
	return "HISTORY OF " + quote(h.Hash)
}

func (f *Forget) String() string { return "FORGET " + quote(f.Hash) }

func (s *Supersede) String() string {
	parts := make([]string, len(s.Set))
	for i, a := range s.Set {
		parts[i] = a.Field + " = " + a.Value.String()
	}
	return "SUPERSEDE " + quote(s.Hash) + " SET " + strings.Join(parts, ", ")
}

func (r *Recall) String() string {
	var b strings.Builder
	b.WriteString("RECALL")
	for i, c := range r.Where {
		if i == 0 {
			b.WriteString(" WHERE ")
		} else {
			b.WriteString(" AND ")
		}
		b.WriteString(c.Field + " = " + quote(c.Value))
	}
	if r.Limit > 0 {
		b.WriteString(" LIMIT " + strconv.Itoa(r.Limit))
	}
	return b.String()
}

// String writes v as CAL.
func (v Value) String() string {
	switch v.Kind {
	case Number:
		return strconv.FormatFloat(v.Num, 'f', -1, 64)
	case Bool:
		if v.Bool {
			return "TRUE"
		}
		return "FALSE"
	case List:
		q := make([]string, len(v.List))
		for i, s := range v.List {
			q[i] = quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return quote(v.Str)
}
