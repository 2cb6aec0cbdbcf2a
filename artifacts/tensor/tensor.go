// Package tensor reads and writes tilepipe tensors: Arrow IPC files holding
// one column of FixedSizeList<dtype>[product(shape)] with the canonical
// extension arrow.fixed_shape_tensor, one row, plus schema metadata.
package tensor

import (
	"encoding/json"
	"fmt"

	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tilepipe/tilepipe/artifacts/internal/footer"
)

// ExtensionName is the canonical Arrow extension for fixed-shape tensors.
const ExtensionName = "arrow.fixed_shape_tensor"

// Column is the name of the one column of a tensor file.
const Column = "tensor"

// Limits applied when reading tensor files made elsewhere.
const (
	MaxMetadataBytes = 1 << 20
	// MaxElems: Arrow's fixed_size_list holds an int32 count. A case's
	// tensors are smaller (oracle.MaxElems); a visit's outputs stack its
	// sets. The body limit follows, and no block may claim more than the
	// file holds (internal/footer).
	MaxElems     = math.MaxInt32
	MaxBodyBytes = MaxElems*8 + 1<<20
)

// Meta describes a tensor; it travels as schema metadata.
type Meta struct {
	Name      string // param name, e.g. "A"
	Role      string // input, expected, bound, output
	Dtype     string // f32 or f64
	Shape     []int
	Case      string
	Generator string
	Seed      uint64
}

// Elems is the product of the shape.
func (m Meta) Elems() int {
	n := 1
	for _, d := range m.Shape {
		n *= d
	}
	return n
}

func (m Meta) metadata() arrow.Metadata {
	return arrow.NewMetadata(
		[]string{"tilepipe.name", "tilepipe.role", "tilepipe.dtype", "tilepipe.case", "tilepipe.generator", "tilepipe.seed"},
		[]string{m.Name, m.Role, m.Dtype, m.Case, m.Generator, strconv.FormatUint(m.Seed, 10)},
	)
}

// DecodeBF16 is the field-level note a bf16 column carries: Arrow has no
// bfloat16, so the bits travel as uint16, and a reader that casts them to
// a float type gets wrong numbers without a word.
const DecodeBF16 = "bfloat16 bits, not integers: float32 = uint32(x) << 16 (numpy: (a.astype(np.uint32) << 16).view(np.float32))"

// fieldMetadata marks the tensor column itself with its dtype (and, for
// bf16, how to decode it), where a reader that looks at the column sees
// it, beside the schema's tilepipe.dtype.
func fieldMetadata(dtype string) arrow.Metadata {
	if dtype == "bf16" {
		return arrow.NewMetadata([]string{"tilepipe.dtype", "tilepipe.decode"}, []string{dtype, DecodeBF16})
	}
	return arrow.NewMetadata([]string{"tilepipe.dtype"}, []string{dtype})
}

// FixedShapeType is arrow.fixed_shape_tensor over a FixedSizeList storage.
type FixedShapeType struct {
	arrow.ExtensionBase
	Shape []int
}

type shapeMeta struct {
	Shape []int `json:"shape"`
}

func newType(value arrow.DataType, shape []int) *FixedShapeType {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return &FixedShapeType{ExtensionBase: arrow.ExtensionBase{Storage: arrow.FixedSizeListOf(int32(n), value)}, Shape: shape}
}

func (*FixedShapeType) ArrayType() reflect.Type { return reflect.TypeOf(FixedShapeArray{}) }
func (*FixedShapeType) ExtensionName() string   { return ExtensionName }
func (t *FixedShapeType) Serialize() string {
	b, _ := json.Marshal(shapeMeta{Shape: t.Shape})
	return string(b)
}
func (t *FixedShapeType) ExtensionEquals(o arrow.ExtensionType) bool {
	u, ok := o.(*FixedShapeType)
	return ok && arrow.TypeEqual(t.Storage, u.Storage) && reflect.DeepEqual(t.Shape, u.Shape)
}
func (*FixedShapeType) Deserialize(storage arrow.DataType, data string) (arrow.ExtensionType, error) {
	var m shapeMeta
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return nil, fmt.Errorf("%s metadata: %w", ExtensionName, err)
	}
	fsl, ok := storage.(*arrow.FixedSizeListType)
	if !ok {
		return nil, fmt.Errorf("%s storage: want fixed_size_list, got %s", ExtensionName, storage)
	}
	n := 1
	for _, d := range m.Shape {
		if d < 0 || d > MaxElems {
			return nil, fmt.Errorf("%s metadata: shape %v out of range", ExtensionName, m.Shape)
		}
		n *= d
		if n > MaxElems {
			return nil, fmt.Errorf("%s metadata: shape %v has more than %d elements", ExtensionName, m.Shape, MaxElems)
		}
	}
	if int(fsl.Len()) != n {
		return nil, fmt.Errorf("%s: shape %v has %d elements, list size is %d", ExtensionName, m.Shape, n, fsl.Len())
	}
	return newType(fsl.Elem(), m.Shape), nil
}

// FixedShapeArray is the array type of [FixedShapeType].
type FixedShapeArray struct {
	array.ExtensionArrayBase
}

func init() {
	if err := arrow.RegisterExtensionType(newType(arrow.PrimitiveTypes.Float32, []int{1})); err != nil {
		panic(err)
	}
}

func valueType(dtype string) (arrow.DataType, int, error) {
	switch dtype {
	case "f32":
		return arrow.PrimitiveTypes.Float32, 4, nil
	case "f64":
		return arrow.PrimitiveTypes.Float64, 8, nil
	case "i64":
		return arrow.PrimitiveTypes.Int64, 8, nil
	case "f16":
		return arrow.FixedWidthTypes.Float16, 2, nil
	case "bf16":
		// Arrow has no bfloat16; its bits travel as uint16 and
		// tilepipe.dtype says how to read them.
		return arrow.PrimitiveTypes.Uint16, 2, nil
	}
	return nil, 0, fmt.Errorf("dtype %q: want f32, f64, i64, f16 or bf16", dtype)
}

// Write writes one tensor as an Arrow IPC file to w. data is the raw
// little-endian element bytes (see [Float32Bytes], [Float64Bytes]); it is
// written without a copy.
func Write(w io.Writer, m Meta, data []byte) error {
	vt, size, err := valueType(m.Dtype)
	if err != nil {
		return fmt.Errorf("write tensor %s: %w", m.Name, err)
	}
	// Refuse what Arrow cannot hold (a zero-length list panics) or what
	// ReadFile would refuse, rather than write an unreadable file.
	n := 1
	for _, d := range m.Shape {
		if d < 1 || d > MaxElems/n {
			return fmt.Errorf("write tensor %s: shape %v: want dimensions >= 1 and at most %d elements", m.Name, m.Shape, MaxElems)
		}
		n *= d
	}
	if len(data) != n*size {
		return fmt.Errorf("write tensor %s: %d bytes, shape %v wants %d", m.Name, len(data), m.Shape, n*size)
	}
	typ := newType(vt, m.Shape)
	child := array.NewData(vt, n, []*memory.Buffer{nil, memory.NewBufferBytes(data)}, nil, 0, 0)
	defer child.Release()
	storage := array.NewData(typ.Storage, 1, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
	defer storage.Release()
	arr := array.NewExtensionArrayWithStorage(typ, array.MakeFromData(storage))
	defer arr.Release()
	md := m.metadata()
	schema := arrow.NewSchema([]arrow.Field{{Name: Column, Type: typ, Metadata: fieldMetadata(m.Dtype)}}, &md)
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 1)
	defer rec.Release()
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
	if err != nil {
		return fmt.Errorf("write tensor %s: %w", m.Name, err)
	}
	if err := fw.Write(rec); err != nil {
		return fmt.Errorf("write tensor %s: %w", m.Name, err)
	}
	return fw.Close()
}

// Tensor is a tensor read from a file; Release frees it.
type Tensor struct {
	Meta Meta
	rec  arrow.RecordBatch
	data []byte
}

// Bytes are the raw element bytes (valid until Release).
func (t *Tensor) Bytes() []byte { return t.data }

// Float32 views the data as float32 (dtype f32 only).
func (t *Tensor) Float32() []float32 {
	if t.Meta.Dtype != "f32" || len(t.data) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.data[0])), len(t.data)/4)
}

// Int64 views the data as int64 (dtype i64 only).
func (t *Tensor) Int64() []int64 {
	if t.Meta.Dtype != "i64" || len(t.data) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&t.data[0])), len(t.data)/8)
}

// Float64 views the data as float64 (dtype f64 only).
func (t *Tensor) Float64() []float64 {
	if t.Meta.Dtype != "f64" || len(t.data) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&t.data[0])), len(t.data)/8)
}

// Release frees the Arrow buffers behind t.
func (t *Tensor) Release() {
	if t.rec != nil {
		t.rec.Release()
		t.rec = nil
		t.data = nil
	}
}

// ReadFile reads and validates the tensor file at path with the size limits
// above. Every structural expectation that fails names the file and field.
func ReadFile(path string, mem memory.Allocator) (*Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := read(f, mem)
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", path, err)
	}
	return t, nil
}

func read(r ipc.ReadAtSeeker, mem memory.Allocator) (t *Tensor, err error) {
	// Arrow's IPC reader panics on some malformed flatbuffers (found by
	// FuzzReadTensor); a foreign file must give an error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("arrow ipc: malformed file: %v", p)
		}
	}()
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	end, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	if err := footer.Check(r, end, MaxMetadataBytes); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	fr, err := ipc.NewFileReader(r, ipc.WithAllocator(mem),
		ipc.WithMetadataSizeLimit(MaxMetadataBytes), ipc.WithBodySizeLimit(MaxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	defer fr.Close()
	m, size, err := schemaMeta(fr.Schema())
	if err != nil {
		return nil, err
	}
	if fr.NumRecords() != 1 {
		return nil, fmt.Errorf("record batches: want 1, got %d", fr.NumRecords())
	}
	rec, err := fr.RecordBatch(0)
	if err != nil {
		return nil, fmt.Errorf("record batch 0: %w", err)
	}
	if rec.NumRows() != 1 {
		return nil, fmt.Errorf("rows: want 1, got %d", rec.NumRows())
	}
	col := rec.Column(0).(array.ExtensionArray).Storage().(*array.FixedSizeList)
	if col.NullN() != 0 {
		return nil, fmt.Errorf("column %s: null tensor", Column)
	}
	vals := col.ListValues()
	if vals.NullN() != 0 {
		return nil, fmt.Errorf("column %s: %d null elements", Column, vals.NullN())
	}
	n := m.Elems()
	if vals.Len() != n {
		return nil, fmt.Errorf("column %s: %d elements, shape %v wants %d", Column, vals.Len(), m.Shape, n)
	}
	buf := vals.Data().Buffers()[1]
	off := vals.Data().Offset() * size
	if buf == nil || buf.Len() < off+n*size {
		return nil, fmt.Errorf("column %s: value buffer too short", Column)
	}
	rec.Retain()
	return &Tensor{Meta: m, rec: rec, data: buf.Bytes()[off : off+n*size]}, nil
}

// schemaMeta checks a tensor file's schema (one fixed-shape column whose
// element type, shape and markers agree with the schema's metadata):
// its Meta and its element size in bytes.
func schemaMeta(schema *arrow.Schema) (Meta, int, error) {
	if schema.NumFields() != 1 || schema.Field(0).Name != Column {
		return Meta{}, 0, fmt.Errorf("schema: want one column %q, got %s", Column, schema)
	}
	typ, ok := schema.Field(0).Type.(*FixedShapeType)
	if !ok {
		return Meta{}, 0, fmt.Errorf("column %s: want extension %s, got %s", Column, ExtensionName, schema.Field(0).Type)
	}
	m, err := parseMeta(schema.Metadata())
	if err != nil {
		return Meta{}, 0, err
	}
	if !equalInts(m.Shape, typ.Shape) && m.Shape != nil {
		return Meta{}, 0, fmt.Errorf("schema metadata: shape %v disagrees with extension shape %v", m.Shape, typ.Shape)
	}
	m.Shape = typ.Shape
	vt, size, err := valueType(m.Dtype)
	if err != nil {
		return Meta{}, 0, fmt.Errorf("schema metadata tilepipe.dtype: %w", err)
	}
	if !arrow.TypeEqual(typ.Storage.(*arrow.FixedSizeListType).Elem(), vt) {
		return Meta{}, 0, fmt.Errorf("column %s: element type %s disagrees with tilepipe.dtype %s", Column, typ.Storage, m.Dtype)
	}
	// The column's own marker (absent in files written before it) must
	// say what the schema says.
	fm := schema.Field(0).Metadata
	for _, k := range []string{"tilepipe.dtype", "tilepipe.decode"} {
		if i := fm.FindKey(k); i >= 0 {
			if want := fieldMetadata(m.Dtype); want.FindKey(k) < 0 || want.Values()[want.FindKey(k)] != fm.Values()[i] {
				return Meta{}, 0, fmt.Errorf("column %s: field metadata %s %q disagrees with tilepipe.dtype %s", Column, k, fm.Values()[i], m.Dtype)
			}
		}
	}
	return m, size, nil
}

func parseMeta(md arrow.Metadata) (Meta, error) {
	get := func(k string) (string, error) {
		i := md.FindKey(k)
		if i < 0 {
			return "", fmt.Errorf("schema metadata: missing %s", k)
		}
		return md.Values()[i], nil
	}
	var m Meta
	var err error
	for _, f := range []struct {
		k string
		v *string
	}{{"tilepipe.name", &m.Name}, {"tilepipe.role", &m.Role}, {"tilepipe.dtype", &m.Dtype}, {"tilepipe.case", &m.Case}, {"tilepipe.generator", &m.Generator}} {
		if *f.v, err = get(f.k); err != nil {
			return m, err
		}
	}
	s, err := get("tilepipe.seed")
	if err != nil {
		return m, err
	}
	if m.Seed, err = strconv.ParseUint(s, 10, 64); err != nil {
		return m, fmt.Errorf("schema metadata tilepipe.seed: %w", err)
	}
	return m, nil
}

func equalInts(a, b []int) bool { return reflect.DeepEqual(a, b) }

// Float32Bytes views v's memory as bytes (little-endian hosts only).
func Float32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}

// Float64Bytes views v's memory as bytes (little-endian hosts only).
func Float64Bytes(v []float64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*8)
}
