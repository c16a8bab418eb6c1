package api

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// The recall page and the grain are the API's most frequent answers; they
// are encoded here field by field, into the bytes encoding/json writes for
// pageJSON and wireGrain (TestPageReplyEncodesAsPage compares the two on
// random grains, escapes, special floats and times). encoding/json's
// reflection was a tenth of the recall handler's CPU for a page of 10
// (docs/performance.md). A field added to grains.Grain must be added here:
// the test fails until it is.

// wireReply answers the status with body, encoded by appendJSON.
type wireReply struct {
	status int
	body   interface{ appendJSON([]byte) ([]byte, error) }
}

func (r wireReply) send(c *gin.Context) {
	buf := replyBuffers.Get().(*[]byte)
	b, err := r.body.appendJSON((*buf)[:0])
	if err != nil {
		// What encoding/json would refuse too (a NaN score, a time past
		// year 9999): the error path c.JSON takes.
		c.JSON(r.status, r.body)
		b = *buf // what was written into it before the error
	} else {
		// Written (copied into the connection's buffer or sent) before
		// Data returns.
		c.Data(r.status, "application/json; charset=utf-8", b)
	}
	// The answer held grains in clear: not left in the pool, nor in the
	// pooled buffer that an answer larger than it outgrew.
	clear(b[:cap(b)])
	if cap(b) != cap(*buf) {
		clear((*buf)[:cap(*buf)])
	}
	if cap(b) <= maxPooledReply {
		*buf = b[:0]
		replyBuffers.Put(buf)
	}
}

// replyBuffers are the buffers answers are encoded into, kept for the next
// answer: a page of 10 grains is about 5 KB, and a buffer grown from
// nothing for each cost a tenth of the recall handler's allocations.
var replyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

// maxPooledReply is the largest buffer kept in replyBuffers; a larger
// answer's buffer is left to the garbage collector.
const maxPooledReply = 64 << 10

// appendJSON appends p as encoding/json encodes it.
func (p pageJSON) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"grains":`...)
	if p.Grains == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range p.Grains {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = p.Grains[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if p.Next != "" {
		b = append(b, `,"next":`...)
		b = appendJSONString(b, p.Next)
	}
	return append(b, '}'), nil
}

// appendJSON appends g as encoding/json encodes a wireGrain: the fields
// in their order, the omitempty ones only when set. The first error (a
// float or a time encoding/json refuses) stops the rest.
func (g *wireGrain) appendJSON(b []byte) ([]byte, error) {
	var err error
	first := true
	key := func(k string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
	}
	str := func(k, v string, omitEmpty bool) {
		if v != "" || !omitEmpty {
			key(k)
			b = appendJSONString(b, v)
		}
	}
	num := func(k string, v float64, omitEmpty bool) {
		if (v != 0 || !omitEmpty) && err == nil {
			key(k)
			b, err = appendJSONFloat(b, v, 64)
		}
	}
	flag := func(k string, v bool) {
		if v {
			key(k)
			b = append(b, "true"...)
		}
	}
	stamp := func(k string, t time.Time) {
		if err == nil {
			key(k)
			b, err = appendJSONTime(b, t)
		}
	}
	b = append(b, '{')
	str("hash", g.Hash, true)
	str("memory", g.Memory, true)
	str("type", g.Type, false)
	str("subject", g.Subject, true)
	str("relation", g.Relation, true)
	str("object", g.Object, true)
	str("content", g.Content, true)
	str("namespace", g.Namespace, true)
	str("scope", g.Scope, true)
	str("user_id", g.UserID, true)
	if len(g.Tags) > 0 {
		key("tags")
		b = append(b, '[')
		for i, t := range g.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, t)
		}
		b = append(b, ']')
	}
	if len(g.Metadata) > 0 {
		key("metadata")
		ks := make([]string, 0, len(g.Metadata))
		for k := range g.Metadata {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		b = append(b, '{')
		for i, k := range ks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, g.Metadata[k])
		}
		b = append(b, '}')
	}
	if len(g.Embedding) > 0 {
		key("embedding")
		b = append(b, '[')
		for i, v := range g.Embedding {
			if i > 0 {
				b = append(b, ',')
			}
			if err == nil {
				b, err = appendJSONFloat(b, float64(v), 32)
			}
		}
		b = append(b, ']')
	}
	num("importance", g.Importance, false)
	num("confidence", g.Confidence, false)
	num("salience", g.Salience, false)
	flag("pinned", g.Pinned)
	flag("archived", g.Archived)
	stamp("created_at", g.CreatedAt)
	str("supersedes", g.Supersedes, true)
	str("superseded_by", g.SupersededBy, true)
	if g.LastRetrievedAt != nil {
		stamp("last_retrieved_at", *g.LastRetrievedAt)
	}
	if g.RetrievalCount != 0 {
		key("retrieval_count")
		b = strconv.AppendInt(b, g.RetrievalCount, 10)
	}
	num("score", g.Score, true)
	if s := g.Scores; s != nil {
		key("scores")
		b = append(b, '{')
		first = true // the keys of the nested object
		num("retrieval", s.Retrieval, false)
		num("salience", s.Salience, false)
		num("retention", s.Retention, false)
		b = append(b, '}')
	}
	flag("erased", g.Erased)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendJSONTime appends t as its MarshalJSON writes it (RFC 3339 with
// nanoseconds, quoted; an error outside what RFC 3339 can write), without
// its allocation.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

// appendJSONFloat appends f as encoding/json writes a float of bits bits
// (ECMAScript's number formatting: exponent form below 1e-6 and from 1e21,
// the exponent not padded), and refuses NaN and the infinities as it does.
func appendJSONFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, bits)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		small, large := abs < 1e-6, abs >= 1e21
		if bits == 32 {
			small, large = float32(abs) < 1e-6, float32(abs) >= 1e21
		}
		if small || large {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-07 -> e-7
		b = b[:n-1]
	}
	return b, nil
}

// appendJSONString appends s quoted as encoding/json quotes a string with
// HTML escaping: '<', '>' and '&' as \u003c, \u003e, \u0026; control bytes
// as \b, \f, \n, \r, \t or \u00XX; invalid UTF-8 as \ufffd; U+2028 and
// U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
