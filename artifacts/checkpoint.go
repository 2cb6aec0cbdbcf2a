package artifacts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Document is a stage's document (tilepipe.json): it names its stage's
// artifact type and carries its schema version. *CaptureDoc,
// *PreparedDoc and *ReplayDoc are the three.
type Document interface {
	StageType() string
	SchemaVersion() int
}

func (*CaptureDoc) StageType() string    { return CaptureType }
func (d *CaptureDoc) SchemaVersion() int { return d.Schema }

func (*PreparedDoc) StageType() string    { return PreparedType }
func (d *PreparedDoc) SchemaVersion() int { return d.Schema }

func (*ReplayDoc) StageType() string    { return ReplayType }
func (d *ReplayDoc) SchemaVersion() int { return d.Schema }

// ReadStage is the one way a stage, a merge, an export or the audit reads
// a stage another made: OpenStage (every blob re-hashed before anything is
// read; verified, when not nil, is told of each), then its document read
// strictly into doc (no unknown field, no trailing data), then the
// document's schema checked against DocSchema.
func ReadStage(dir string, doc Document, verified func(name string, d ocispec.Descriptor)) (*Stage, error) {
	st, err := OpenStage(dir, doc.StageType(), verified)
	if err != nil {
		return nil, err
	}
	if err := st.ReadDoc(doc); err != nil {
		return nil, err
	}
	if v := doc.SchemaVersion(); v != DocSchema {
		return nil, fmt.Errorf("%s %s: %s schema: want %d, got %d", StageName(doc.StageType()), dir, DocTitle, DocSchema, v)
	}
	return st, nil
}

// ValidateStage checks the invariants every committed stage keeps beyond
// what OpenStage checks: index.json names it (ref.name) as its artifact
// type gives, every layer has the media type its title gives (MediaFor),
// and the JSON tilepipe writes there (the document, the receipt,
// plan.json, journal.jsonl) holds no null where its Go type has a list: a
// list is always a list (an absent optional object may be null). It
// returns every violation, joined, each naming the stage's directory and
// the file; nil when there is none. The stages' tests call it on what
// they commit (CheckStage), the audit on what it audits.
func ValidateStage(st *Stage) error {
	dir := st.Store.Dir()
	var errs []error
	typ := st.Descriptor.ArtifactType
	if typ == "" {
		typ = st.Manifest.ArtifactType
	}
	if got, want := st.Descriptor.Annotations[ocispec.AnnotationRefName], StageName(typ); got != want {
		errs = append(errs, fmt.Errorf("%s: index.json ref.name %q, want %q", dir, got, want))
	}
	docs := map[string]ocispec.Descriptor{"receipt": st.Manifest.Config}
	titles := make([]string, 0, len(st.Layers))
	for title := range st.Layers {
		titles = append(titles, title)
	}
	sort.Strings(titles)
	for _, title := range titles {
		l := st.Layers[title]
		if want := MediaFor(title, l.MediaType); l.MediaType != want {
			errs = append(errs, fmt.Errorf("%s: layer %s: mediaType %q, its title gives %q", dir, title, l.MediaType, want))
		}
		if title == DocTitle || title == "plan.json" || title == "journal.jsonl" {
			docs[title] = l
		}
	}
	for _, name := range []string{"receipt", DocTitle, "plan.json", "journal.jsonl"} {
		d, ok := docs[name]
		if !ok {
			continue
		}
		b, err := st.Store.ReadVerified(d.Digest, name, MaxDocBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lines := [][]byte{b}
		if name == "journal.jsonl" {
			lines = bytes.Split(bytes.TrimSpace(b), []byte("\n"))
		}
		for i, line := range lines {
			var v any
			if err := json.Unmarshal(line, &v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s line %d: %v", dir, name, i+1, err))
				continue
			}
			if p := nullList(v, shapes(typ)[name], ""); p != "" {
				errs = append(errs, fmt.Errorf("%s: %s: null at %s, want a value ([] for a list)", dir, name, p))
			}
		}
	}
	return errors.Join(errs...)
}

// shapes are the Go types the JSON files of a stage of type typ decode
// into, by file: what says where a list is.
func shapes(typ string) map[string]reflect.Type {
	m := map[string]reflect.Type{
		"receipt":       reflect.TypeFor[Statement[Receipt]](),
		"plan.json":     reflect.TypeFor[PlanRecord](),
		"journal.jsonl": reflect.TypeFor[JournalLine](),
	}
	switch typ {
	case CaptureType:
		m[DocTitle] = reflect.TypeFor[CaptureDoc]()
	case PreparedType:
		m[DocTitle] = reflect.TypeFor[PreparedDoc]()
	case ReplayType:
		m[DocTitle] = reflect.TypeFor[ReplayDoc]()
	}
	return m
}

// nullList is the path of the first null in v (decoded JSON) where t, the
// Go type v decodes into, holds a slice; "" when there is none. A null
// where t is a pointer, a map or an interface, or where t is not known
// (nil: a file of no known shape), is a value: an absent object.
func nullList(v any, t reflect.Type, path string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	switch x := v.(type) {
	case nil:
		if t.Kind() == reflect.Slice {
			return path
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var ft reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				ft = fieldType(t, k)
			case reflect.Map:
				ft = t.Elem()
			}
			if p := nullList(x[k], ft, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range x {
				if p := nullList(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

// fieldType is the type of struct t's field that JSON key k decodes into
// (embedded structs' fields included), or nil.
func fieldType(t reflect.Type, k string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if got := fieldType(ft, k); got != nil {
					return got
				}
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, k) {
			return f.Type
		}
	}
	return nil
}
