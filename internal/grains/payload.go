package grains

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// DecodePayload parses a canonical payload.
//
// Every recall decodes each grain it returns, and encoding/json's
// reflection was most of a recall's decoding time, so the canonical form
// (Payload.Encode: one object of known keys, string values, a string list
// and a string map) is parsed by hand. Anything else, including JSON that
// encoding/json would accept in another shape, goes to encoding/json, so
// the answer is always encoding/json's.
func DecodePayload(b []byte) (Payload, error) {
	if p, ok := decodeCanonical(b); ok {
		return p, nil
	}
	var p Payload
	if err := json.Unmarshal(b, &p); err != nil {
		return Payload{}, Wrap(CodeInternal, "corrupt grain payload", err)
	}
	return p, nil
}

// decodeCanonical parses b if it is in the form Payload.Encode writes; ok
// is false for anything else.
func decodeCanonical(b []byte) (p Payload, ok bool) {
	// Strings without escapes are slices of one copy of b: one allocation
	// for all of them.
	d := payloadDecoder{b: b, s: string(b)}
	if !d.byte('{') {
		return Payload{}, false
	}
	if d.byte('}') {
		return p, d.end()
	}
	seen := 0
	for {
		key, ok := d.str()
		if !ok || len(key) != 1 || !d.byte(':') {
			return Payload{}, false
		}
		// Each key at most once, in Encode's order: a repeated or
		// reordered key is left to encoding/json.
		i := indexByte("srocutme", key[0])
		if i < 0 || 1<<i <= seen {
			return Payload{}, false
		}
		seen |= 1 << i
		switch key[0] {
		case 't':
			if p.Tags, ok = d.strList(); !ok {
				return Payload{}, false
			}
		case 'm':
			if p.Metadata, ok = d.strMap(); !ok {
				return Payload{}, false
			}
		case 'e':
			v, ok := d.str()
			if !ok {
				return Payload{}, false
			}
			e, err := base64.StdEncoding.DecodeString(v)
			if err != nil || len(e) == 0 {
				return Payload{}, false
			}
			p.Embedding = e
		default:
			v, ok := d.str()
			if !ok {
				return Payload{}, false
			}
			*[]*string{&p.Subject, &p.Relation, &p.Object, &p.Content, &p.UserID}[i] = v
		}
		if d.byte('}') {
			return p, d.end()
		}
		if !d.byte(',') {
			return Payload{}, false
		}
	}
}

func indexByte(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// payloadDecoder reads compact JSON (no white space, as encoding/json
// writes it) from b.
type payloadDecoder struct {
	b   []byte
	s   string // b, as a string
	pos int
}

func (d *payloadDecoder) byte(c byte) bool {
	if d.pos < len(d.b) && d.b[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *payloadDecoder) end() bool { return d.pos == len(d.b) }

// strList reads a non-empty array of strings.
func (d *payloadDecoder) strList() ([]string, bool) {
	if !d.byte('[') {
		return nil, false
	}
	var out []string
	for {
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if d.byte(']') {
			return out, true
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}

// strMap reads a non-empty object of string values with distinct keys.
func (d *payloadDecoder) strMap() (map[string]string, bool) {
	if !d.byte('{') {
		return nil, false
	}
	out := map[string]string{}
	for {
		k, ok := d.str()
		if !ok || !d.byte(':') {
			return nil, false
		}
		v, ok := d.str()
		if _, dup := out[k]; !ok || dup {
			return nil, false
		}
		out[k] = v
		if d.byte('}') {
			return out, true
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}

// str reads a JSON string of valid UTF-8.
func (d *payloadDecoder) str() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.pos
	for d.pos < len(d.b) {
		switch c := d.b[d.pos]; {
		case c == '"':
			raw := d.s[start:d.pos]
			d.pos++
			if !utf8.ValidString(raw) {
				return "", false // encoding/json would replace the bad bytes
			}
			return raw, true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		default:
			d.pos++
		}
	}
	return "", false
}

// escaped reads the rest of a string that holds an escape, from start
// (just after the opening quote).
func (d *payloadDecoder) escaped(start int) (string, bool) {
	out := make([]byte, 0, d.pos-start+16)
	run := start
	for d.pos < len(d.b) {
		c := d.b[d.pos]
		switch {
		case c == '"':
			out = append(out, d.b[run:d.pos]...)
			d.pos++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			d.pos++
			continue
		}
		out = append(out, d.b[run:d.pos]...)
		if d.pos+1 >= len(d.b) {
			return "", false
		}
		e := d.b[d.pos+1]
		d.pos += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A pair, or encoding/json's replacement of a lone half.
				lo := rune(-1)
				if d.pos+1 < len(d.b) && d.b[d.pos] == '\\' && d.b[d.pos+1] == 'u' {
					d.pos += 2
					if lo, ok = d.hex4(); !ok {
						return "", false
					}
				}
				if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
					r = pair
				} else {
					return "", false // rare: leave the exact replacement rules to encoding/json
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
		run = d.pos
	}
	return "", false
}

func (d *payloadDecoder) hex4() (rune, bool) {
	if d.pos+4 > len(d.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.b[d.pos:d.pos+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	d.pos += 4
	return rune(v), true
}

// EncodeVector returns v as little-endian float32s (nil for an empty v).
func EncodeVector(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// DecodeVector is the inverse of EncodeVector; trailing bytes short of a
// float are ignored.
func DecodeVector(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
