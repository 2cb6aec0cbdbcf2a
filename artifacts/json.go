package artifacts

import (
	"encoding/json"
	"reflect"
	"strings"
)

// MarshalJSON is json.MarshalIndent (two spaces, a final newline) with
// every list written as a list: a nil slice that encoding/json would
// write as null (a field without omitempty, a map value, an element) is
// written as []. Every JSON document tilepipe writes goes through it, so
// a reader (jq, pandas, a JSON schema) never meets null where a list is
// meant.
func MarshalJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(lists(reflect.ValueOf(v)).Interface(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// MarshalLine is MarshalJSON on one line, without the newline: a line of
// a JSON Lines file.
func MarshalLine(v any) ([]byte, error) { return json.Marshal(lists(reflect.ValueOf(v)).Interface()) }

// lists returns v, or a copy of it, in which every nil slice that would be
// marshalled is empty instead. Values of types with their own MarshalJSON
// are left as they are, and so are the fields of an embedded unexported
// struct, which reflection cannot set (no tilepipe document has one).
func lists(v reflect.Value) reflect.Value {
	if !v.IsValid() {
		return v
	}
	if v.Type().Implements(marshaler) && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		return v
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(lists(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(lists(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			fv := v.Field(i)
			if fv.Kind() == reflect.Slice && fv.IsNil() && omitempty(f) {
				continue
			}
			out.Field(i).Set(lists(fv))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			out.SetMapIndex(it.Key(), lists(it.Value()))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return reflect.MakeSlice(v.Type(), 0, 0)
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v // []byte: base64, not a list
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(lists(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(lists(v.Index(i)))
		}
		return out
	}
	return v
}

var marshaler = reflect.TypeFor[json.Marshaler]()

func omitempty(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	for _, o := range strings.Split(opts, ",") {
		if o == "omitempty" || o == "omitzero" {
			return true
		}
	}
	return false
}
