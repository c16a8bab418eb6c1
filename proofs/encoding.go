package proofs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// appendJSONString appends s as a JSON string. Only '"', '\\', control
// characters and U+2028/U+2029 are escaped; everything else, '<', '>' and
// '&' included, is written as is. This is the canonical string form of every
// document in this package.
func appendJSONString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, errors.New("string is not valid UTF-8")
	}
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"'), nil
}

// appendBase64 appends b as a JSON string of standard padded base64.
func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendBase64List appends list as a JSON array of base64 strings. A nil or
// empty list is written as [].
func appendBase64List(dst []byte, list [][]byte) []byte {
	dst = append(dst, '[')
	for i, h := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendBase64(dst, h)
	}
	return append(dst, ']')
}

// decodeBase64 decodes standard padded base64 and accepts only the canonical
// encoding: no line breaks, no non-zero padding bits.
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("invalid base64: %w", err)
	}
	if base64.StdEncoding.EncodeToString(b) != s {
		return nil, errors.New("non-canonical base64")
	}
	return b, nil
}

// decodeHash decodes one base64 SHA-256 hash.
func decodeHash(s string) ([]byte, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, err
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("hash is %d bytes, want 32", len(b))
	}
	return b, nil
}

// fieldDecoder decodes one raw JSON value into its destination.
type fieldDecoder func(raw []byte) error

// decodeObject reads one JSON object from b. Every key must be in fields,
// none may repeat, every key in required must be present and nothing but
// white space may follow the object. Values are handed raw to their
// decoders, which must reject null where it is not meaningful.
func decodeObject(b []byte, fields map[string]fieldDecoder, required []string) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		key, _ := tok.(string)
		decode, ok := fields[key]
		if !ok {
			return fmt.Errorf("unknown field %q", key)
		}
		if seen[key] {
			return fmt.Errorf("duplicate field %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("field %q: invalid JSON: %w", key, err)
		}
		if err := decode(raw); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	for _, k := range required {
		if !seen[k] {
			return fmt.Errorf("missing field %q", k)
		}
	}
	return nil
}

// stringField decodes a JSON string (not null) into *dst.
func stringField(dst *string) fieldDecoder {
	return func(raw []byte) error {
		if len(raw) == 0 || raw[0] != '"' {
			return errors.New("not a string")
		}
		return json.Unmarshal(raw, dst)
	}
}

// uintField decodes a plain decimal JSON number (no sign, fraction,
// exponent or leading zero) into *dst.
func uintField(dst *uint64) fieldDecoder {
	return func(raw []byte) error {
		v, err := parseDecimal(string(raw))
		if err != nil {
			return err
		}
		*dst = v
		return nil
	}
}

// parseDecimal parses an unsigned decimal with no leading zeros.
func parseDecimal(s string) (uint64, error) {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return 0, fmt.Errorf("%q is not a canonical unsigned decimal", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a canonical unsigned decimal", s)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return v, nil
}

// bytesField decodes a JSON string of canonical base64 into *dst.
func bytesField(dst *[]byte) fieldDecoder {
	return func(raw []byte) error {
		var s string
		if err := stringField(&s)(raw); err != nil {
			return err
		}
		b, err := decodeBase64(s)
		if err != nil {
			return err
		}
		*dst = b
		return nil
	}
}

// hashListField decodes a JSON array (not null) of at most max base64
// SHA-256 hashes into *dst. An empty array gives a non-nil empty slice.
func hashListField(dst *[][]byte, max int) fieldDecoder {
	return func(raw []byte) error {
		if len(raw) == 0 || raw[0] != '[' {
			return errors.New("not an array")
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return err
		}
		if len(list) > max {
			return fmt.Errorf("%d hashes, at most %d allowed", len(list), max)
		}
		out := make([][]byte, 0, len(list))
		for i, s := range list {
			h, err := decodeHash(s)
			if err != nil {
				return fmt.Errorf("hash %d: %w", i, err)
			}
			out = append(out, h)
		}
		*dst = out
		return nil
	}
}

// stringListField decodes a JSON array (not null) of strings into *dst.
func stringListField(dst *[]string) fieldDecoder {
	return func(raw []byte) error {
		if len(raw) == 0 || raw[0] != '[' {
			return errors.New("not an array")
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return err
		}
		*dst = list
		return nil
	}
}

// appendBase64Raw appends b in standard padded base64, unquoted.
func appendBase64Raw(dst, b []byte) []byte {
	return base64.StdEncoding.AppendEncode(dst, b)
}
