package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// A Validator checks a decoded value: [Call.Input] and the other decoding helpers call
// Validate after decoding and refuse the data with its error's text when it fails.
type Validator interface {
	Validate() error
}

// decode reads JSON data into v for what (`the job's input`), failing with an
// [*InvalidInput] of code whose message names the place and the mismatch but never the
// value; the decoder's own text goes to Err.
func decode(data []byte, v any, what, code string) error {
	target := typeName(v)
	if t := reflect.TypeOf(v); t != nil && t.Kind() == reflect.Pointer {
		target = t.Elem().String()
	}
	if err := json.Unmarshal(data, v); err != nil {
		var (
			syntax   *json.SyntaxError
			mismatch *json.UnmarshalTypeError
		)
		message := fmt.Sprintf("%s does not fit %s", what, target)
		switch {
		case errors.As(err, &syntax):
			message = fmt.Sprintf("%s is not JSON (at byte %d)", what, syntax.Offset)
		case errors.As(err, &mismatch):
			at := ""
			if mismatch.Field != "" {
				at = fmt.Sprintf(" at `%s`", mismatch.Field)
			}
			message = fmt.Sprintf("%s does not fit %s%s: expected %s, got %s",
				what, target, at, jsonKind(mismatch.Type), mismatch.Value)
		}
		return &InvalidInput{Code: code, Message: message, Err: err}
	}
	if validator, ok := v.(Validator); ok {
		if err := validator.Validate(); err != nil {
			var invalid *InvalidInput
			if errors.As(err, &invalid) {
				if invalid.Code == "" {
					invalid.Code = code
				}
				return invalid
			}
			return &InvalidInput{Code: code, Message: fmt.Sprintf("%s does not fit %s: %s", what, target, err), Err: err}
		}
	}
	return nil
}

// jsonKind names the JSON a Go type takes, for a mismatch's message.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return t.String()
}
