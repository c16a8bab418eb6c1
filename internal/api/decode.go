package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

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
		return nil, grains.Wrap(grains.CodeInvalidArgument, "the body could not be read", err)
	case len(bytes.TrimSpace(b)) == 0:
		return nil, grains.Errorf(grains.CodeInvalidArgument, "a JSON body is required")
	}
	return b, nil
}

func tooLarge(limit int64) error {
	return apiError(CodePayloadTooLarge, "the body exceeds "+strconv.FormatInt(limit, 10)+" bytes",
		"split a batch into smaller ones")
}

// decodeStrict decodes one JSON value into v: unknown fields, wrong types
// and trailing data are errors. The errors name fields, never values.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return grains.Errorf(grains.CodeInvalidArgument, "trailing data after the JSON value")
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

var fieldName = regexp.MustCompile(`^[A-Za-z0-9_.\[\]-]{1,64}$`)

func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return grains.Errorf(grains.CodeInvalidArgument, "malformed JSON at byte %d", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return grains.Errorf(grains.CodeInvalidArgument, "malformed JSON: unexpected end")
	case errors.As(err, &te):
		// Field is the JSON path, with the names of embedded Go structs.
		field := strings.ReplaceAll(te.Field, "GrainInput.", "")
		if field == "" || !fieldName.MatchString(field) {
			return grains.Errorf(grains.CodeInvalidArgument, "the body must be a JSON object of the documented form")
		}
		return grains.FieldError(grains.CodeInvalidArgument, field, "wrong type: want "+kindName(te.Type))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		if !fieldName.MatchString(name) {
			return grains.Errorf(grains.CodeInvalidArgument, "unknown field")
		}
		return grains.FieldError(grains.CodeInvalidArgument, name, "unknown field")
	}
	// Other decoding errors (e.g. a time that is not RFC 3339) may quote the
	// value: say only that the body is malformed.
	return grains.Wrap(grains.CodeInvalidArgument, "a field has a malformed value", err)
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
