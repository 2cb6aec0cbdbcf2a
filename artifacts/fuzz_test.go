package artifacts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The stage documents are what a hostile stage directory hands tilepipe:
// index.json, the manifest, the receipt, tilepipe.json, and a replay's
// plan.json and journal.jsonl. Real documents seed the corpus from
// testdata/fuzz/FuzzStageDocs (taken from a passing naive run of
// cmd/tilepipe's verify_test.go); the edge cases below are written by hand.

// fuzzDocTypes makes a fresh zero value of every type a stage decodes with
// strictJSON or ReadJSON.
var fuzzDocTypes = []func() any{
	func() any { return new(CaptureDoc) },
	func() any { return new(PreparedDoc) },
	func() any { return new(ReplayDoc) },
	func() any { return new(Statement[Receipt]) },
	func() any { return new(ocispec.Index) },
	func() any { return new(ocispec.Manifest) },
	func() any { return new(PlanRecord) },
	func() any { return new(JournalLine) },
}

// fuzzDocEdges are hand-written edge cases for every document type.
var fuzzDocEdges = []string{
	``,
	`{}`,
	`null`,
	`[]`,
	`{"schema": null, "cases": null, "routes": null, "sandbox": null}`,
	`{"schema": 1e400}`,
	`{"schema": 99999999999999999999999999999}`,
	`{"schema": -9223372036854775808, "threads": 9223372036854775807}`,
	`{"config": {"seed": 18446744073709551615, "sampleMs": 1.7976931348623157e308}}`,
	`{"config": {"seed": 18446744073709551616}}`,
	`{"config": {"sampleMs": -0, "warmupMs": 5e-324}}`,
	`{"schema": 1, "schema": 2}`,
	`{"config": {"rounds": 1}, "config": {"samples": 2}}`,
	`{"SCHEMA": 1, "Cohort": "x"}`,
	`{"schema": 1, "extra": true}`,
	`{"schema": 1} trailing`,
	`{"schema": 1}{"schema": 2}`,
	"{\"cohort\": \"\\ud800\\udc00\\ud800 \xff\xfe\"}", // lone surrogate, invalid UTF-8
	`{"plan": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`{"predicate": {"parameters": {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}}`,
	`{"predicate": {"parameters": {"n": 1e308, "m": -1e-308, "i": 123456789012345678901234567890}}}`,
	`{"predicate": {"startedOn": "2026-11-30T23:42:00.123456789+05:30", "finishedOn": "0001-01-01T00:00:00Z"}}`,
	`{"predicate": {"startedOn": "9999-12-31T23:59:59.999999999-23:59"}}`,
	`{"predicate": {"startedOn": "2026-11-30 23:42:00"}}`,
	`{"predicate": {"startedOn": null, "notes": {}, "predecessor": {}}}`,
	`{"visit": {"index": 1, "start": "2026-11-30T23:42:00Z", "checks": {}, "argv": [], "outputs": []}}`,
	`{"session": {"index": 0, "floors": []}, "visit": null, "closure": {}}`,
	`{"manifests": [{"digest": "sha256:x", "size": -1, "annotations": {}, "data": ""}]}`,
	`{"manifests": [{"data": "aGVsbG8="}, {"data": "aGVs\nbG8="}, {"data": "!!"}]}`,
	`{"layers": [{"platform": {"os.features": [], "architecture": ""}, "urls": []}]}`,
	`{"entries": [{"env": {}, "objects": [], "program": {}}]}`,
	`{"cases": [{"builds": [{"link": [], "schedule": {}, "toolchain": {"a": null}}]}]}`,
	`{"summary": [{"ratio": -0, "ratioPairs": 0}]}`,
	`{"schema": "1"}`,
	`{"schema": 1.5}`,
	`{"schema": true}`,
	`"\u0000"`,
	`{"a":` + strings.Repeat(`[`, 10000) + strings.Repeat(`]`, 10000) + `}`,
	strings.Repeat(`[`, 20000),
}

// FuzzStageDocs decodes arbitrary bytes into every stage document type
// with strictJSON, the decoder OpenStage and ReadJSON use (replay's
// --resume and the audit decode plan.json and journal lines the same way),
// and plan.json and journal lines also with json.Unmarshal, the looser
// decoder --resume used for them before 6f6cae2. It must never panic; a
// document that decodes must re-encode, and decoding that encoding must
// give an equal value.
//
// strictJSON decodes the first JSON value and ignores what follows it
// (`{"schema": 1} trailing` decodes); it matches keys case-insensitively
// and the last of duplicate keys wins. The edge cases below keep those
// inputs in the corpus; this target checks they do not crash, not that
// they are refused.
func FuzzStageDocs(f *testing.F) {
	for _, s := range fuzzDocEdges {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mk := range fuzzDocTypes {
			v := mk()
			if err := strictJSON(b, v); err != nil {
				continue
			}
			roundTrip(t, "strictJSON", b, v, mk)
		}
		// json.Unmarshal: unknown fields allowed, trailing data refused.
		for _, mk := range fuzzDocTypes[6:] {
			v := mk()
			if err := json.Unmarshal(b, v); err != nil {
				continue
			}
			roundTrip(t, "json.Unmarshal", b, v, mk)
		}
	})
}

func roundTrip(t *testing.T, how string, in []byte, v any, mk func() any) {
	t.Helper()
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%T decoded by %s from %q does not re-encode: %v", v, how, in, err)
	}
	w := mk()
	if err := strictJSON(enc, w); err != nil {
		t.Fatalf("%T: re-encoding %s of %q does not decode: %v", v, enc, in, err)
	}
	if !jsonEqual(reflect.ValueOf(v), reflect.ValueOf(w), false) {
		t.Fatalf("%T: round trip changed the value:\n in  %q\n got %+v\n enc %s\n then %+v", v, in, v, enc, w)
	}
}

var timeType = reflect.TypeFor[time.Time]()

// jsonEqual is reflect.DeepEqual narrowed by what JSON cannot carry: under
// an omitempty tag an empty slice or map is not encoded, so it comes back
// nil (`"link": []` decodes to an empty slice, re-encodes to nothing and
// decodes to nil). Nothing else is forgiven. omitEmpty says whether a and
// b are a struct field tagged omitempty.
func jsonEqual(a, b reflect.Value, omitEmpty bool) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return jsonEqual(a.Elem(), b.Elem(), false)
	case reflect.Slice, reflect.Map:
		if omitEmpty && a.Len() == 0 && b.Len() == 0 {
			return true
		}
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if a.Kind() == reflect.Map {
			for _, k := range a.MapKeys() {
				bv := b.MapIndex(k)
				if !bv.IsValid() || !jsonEqual(a.MapIndex(k), bv, false) {
					return false
				}
			}
			return true
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if !jsonEqual(a.Index(i), b.Index(i), false) {
				return false
			}
		}
		return true
	case reflect.Struct:
		if a.Type() == timeType {
			return reflect.DeepEqual(a.Interface(), b.Interface())
		}
		for i := range a.NumField() {
			sf := a.Type().Field(i)
			if !sf.IsExported() {
				return reflect.DeepEqual(a.Interface(), b.Interface())
			}
			_, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !jsonEqual(a.Field(i), b.Field(i), strings.Contains(","+opts+",", ",omitempty,")) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
}

// fuzzManifestMark and fuzzSizeMark in a fuzzed index.json stand for the
// digest and the size of the fuzzed manifest, so the fuzzer reaches the
// manifest checks without having to forge a sha256.
const (
	fuzzManifestMark = "@MANIFEST@"
	fuzzSizeMark     = "@SIZE@"
)

// FuzzOpenStage puts fuzzed bytes as index.json (and, when the second
// input is not empty, fuzzed bytes as the manifest blob, in place of the
// real one) into a small real capture stage and opens it: OpenStage must
// return an error or a stage, never panic or hang, and a stage it returns
// must be what it checked. The stage is built once per fuzz worker; an
// iteration rewrites index.json and swaps one blob, nothing more.
func FuzzOpenStage(f *testing.F) {
	s := TestStore(f)
	for _, b := range []string{"named layer", "another layer"} {
		d, err := s.PutBytes([]byte(b), MediaOctet)
		if err != nil {
			f.Fatal(err)
		}
		s.Name("data/"+strings.Fields(b)[0]+".bin", d)
	}
	doc := CaptureDoc{Schema: DocSchema, Cohort: "fuzz", Threads: 1, Routes: []Route{{Name: "naive", Kind: "object", Available: true}}}
	md, err := s.Finish(CaptureType, doc, Receipt{Stage: "capture", Tool: ToolInfo(), Parameters: map[string]any{"threads": 1}}, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	dir := s.Dir()
	indexPath := filepath.Join(dir, ocispec.ImageIndexFile)
	realIndex, err := os.ReadFile(indexPath)
	if err != nil {
		f.Fatal(err)
	}
	realManifest, err := os.ReadFile(s.Path(md.Digest))
	if err != nil {
		f.Fatal(err)
	}
	marked := bytes.ReplaceAll(realIndex, []byte(md.Digest.String()), []byte(fuzzManifestMark))
	marked = bytes.ReplaceAll(marked, []byte(fmt.Sprintf(`"size": %d`, md.Size)), []byte(`"size": `+fuzzSizeMark))
	if bytes.Equal(marked, realIndex) || !bytes.Contains(marked, []byte(fuzzSizeMark)) {
		f.Fatalf("cannot mark the manifest's digest and size in %s", realIndex)
	}
	realPath, aside := s.Path(md.Digest), filepath.Join(filepath.Dir(dir), "real-manifest")
	var m ocispec.Manifest
	if err := json.Unmarshal(realManifest, &m); err != nil {
		f.Fatal(err)
	}

	f.Add(realIndex, []byte(nil))
	f.Add(marked, realManifest)
	f.Add([]byte(`{"manifests": []}`), []byte(nil))
	f.Add([]byte(`{"manifests": [{"digest": "sha256:`+strings.Repeat("0", 64)+`"}]}`), []byte(nil))
	f.Add([]byte(`{"manifests": [{"digest": "sha512:`+strings.Repeat("0", 128)+`"}]}`), []byte(nil))
	f.Add([]byte(`{"manifests": [{"digest": "sha256:../../../etc/passwd"}]}`), []byte(nil))
	f.Add([]byte(`{"manifests": [{"digest": "`+m.Config.Digest.String()+`"}]}`), []byte(nil))
	f.Add([]byte(`{"manifests": [{"digest": "@MANIFEST@", "size": @SIZE@}, {"digest": "@MANIFEST@"}]}`), realManifest)
	f.Add([]byte(`{"manifests": [{"mediaType": "`+ocispec.MediaTypeImageManifest+`", "artifactType": "`+CaptureType+`", "digest": "@MANIFEST@", "size": @SIZE@}]}`), realManifest)
	// Hostile manifests: a layer titled like a path out of the store, two
	// layers of one title, a layer without a title, a negative size,
	// malformed config and layer digests, another artifact type.
	for _, mut := range []func(m *ocispec.Manifest){
		func(m *ocispec.Manifest) { m.Layers[0].Annotations[AnnotationTitle] = "../../escape" },
		func(m *ocispec.Manifest) { m.Layers[1].Annotations = m.Layers[0].Annotations },
		func(m *ocispec.Manifest) { m.Layers[0].Annotations = nil },
		func(m *ocispec.Manifest) { m.Layers[0].Size = -1 },
		func(m *ocispec.Manifest) { m.Config.Digest = "sha256:zz" },
		// Digests without "algorithm:": go-digest's Encoded panics on
		// them (testdata/fuzz/FuzzOpenStage/e600802b0fe222eb).
		func(m *ocispec.Manifest) { m.Config.Digest = Digest(m.Config.Digest.Encoded()) },
		func(m *ocispec.Manifest) { m.Layers[1].Digest = "" },
		func(m *ocispec.Manifest) { m.Layers = nil; m.ArtifactType = PreparedType },
	} {
		mm := m
		mm.Layers = append([]ocispec.Descriptor(nil), m.Layers...)
		for i := range mm.Layers {
			mm.Layers[i].Annotations = map[string]string{AnnotationTitle: m.Layers[i].Annotations[AnnotationTitle]}
		}
		mut(&mm)
		b, _ := json.Marshal(mm)
		f.Add(marked, b)
	}
	f.Add(marked, []byte(`{"schemaVersion": 2, "artifactType": "`+CaptureType+`", "config": {}, "layers": [{}]}`))

	f.Fuzz(func(t *testing.T, index, manifest []byte) {
		var fd Digest
		if len(manifest) > 0 {
			fd = digest.FromBytes(manifest)
			index = bytes.ReplaceAll(index, []byte(fuzzManifestMark), []byte(fd.String()))
			index = bytes.ReplaceAll(index, []byte(fuzzSizeMark), []byte(strconv.Itoa(len(manifest))))
			// The fuzzed manifest replaces the real one: a blob no
			// descriptor lists makes OpenStage refuse the stage.
			if fd != md.Digest {
				if err := os.Rename(realPath, aside); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := os.Rename(aside, realPath); err != nil {
						t.Fatal(err)
					}
				}()
			}
			p := s.Path(fd)
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
				if err := os.WriteFile(p, manifest, 0o444); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(p)
			}
		}
		if err := os.WriteFile(indexPath, index, 0o644); err != nil {
			t.Fatal(err)
		}
		var calls []string
		st, err := OpenStage(dir, CaptureType, func(name string, d ocispec.Descriptor) { calls = append(calls, name) })
		if err != nil {
			if st != nil {
				t.Fatalf("OpenStage returned a stage with error %v", err)
			}
			return
		}
		if len(manifest) > 0 && st.Descriptor.Digest != md.Digest && st.Descriptor.Digest != fd {
			t.Fatalf("OpenStage took manifest %s, which is neither the real one nor the fuzzed one", st.Descriptor.Digest)
		}
		if st.Manifest.ArtifactType != CaptureType {
			t.Fatalf("OpenStage returned artifactType %q", st.Manifest.ArtifactType)
		}
		if len(calls) != 2+len(st.Layers) || len(st.Layers) != len(st.Manifest.Layers) {
			t.Fatalf("OpenStage verified %v for %d layers", calls, len(st.Manifest.Layers))
		}
		for title, l := range st.Layers {
			if title == "" || st.Store.Verify(l, title) != nil {
				t.Fatalf("OpenStage returned unverified layer %q %+v", title, l)
			}
		}
		// What a stage reads next: its document and its receipt.
		var cd CaptureDoc
		_ = st.ReadDoc(&cd)
		_, _ = st.Receipt()
	})
}
