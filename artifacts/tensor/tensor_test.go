package tensor

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func baseMeta(dtype string, shape ...int) Meta {
	return Meta{Name: "A", Role: "input", Dtype: dtype, Shape: shape, Case: "gemm-2x3x4", Generator: "normal", Seed: 7}
}

// encode writes one tensor to memory.
func encode(t testing.TB, m Meta, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, m, data); err != nil {
		t.Fatalf("Write(%+v) = %v", m, err)
	}
	return buf.Bytes()
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestRoundTrip(t *testing.T) {
	f32 := []float32{1, -2.5, float32(math.Inf(1)), float32(math.NaN()), 0, math.SmallestNonzeroFloat32}
	f64 := []float64{1, -2.5, math.MaxFloat64, math.Copysign(0, -1)}
	i64 := make([]byte, 5*8)
	for i, v := range []int64{0, -1, math.MaxInt64, math.MinInt64, 42} {
		binary.LittleEndian.PutUint64(i64[i*8:], uint64(v))
	}
	tests := []struct {
		name string
		meta Meta
		data []byte
	}{
		{"f32 matrix", baseMeta("f32", 2, 3), Float32Bytes(f32)},
		{"f64 vector", baseMeta("f64", 4), Float64Bytes(f64)},
		{"i64 rank 3", baseMeta("i64", 1, 1, 5), i64},
		{"f32 scalar", baseMeta("f32"), Float32Bytes([]float32{3})},
		{"f16 vector", baseMeta("f16", 3), []byte{0x00, 0x3c, 0x00, 0xc0, 0x5d, 0x7e}},   // 1, -2, NaN
		{"bf16 vector", baseMeta("bf16", 3), []byte{0x80, 0x3f, 0x00, 0xc0, 0xde, 0x7f}}, // 1, -2, NaN
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			path := filepath.Join(t.TempDir(), "t.arrow")
			if err := os.WriteFile(path, encode(t, tt.meta, tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(path, mem)
			if err != nil {
				t.Fatalf("ReadFile(Write(%+v)) = %v", tt.meta, err)
			}
			defer got.Release()
			want := tt.meta
			if !reflect.DeepEqual(got.Meta, want) {
				t.Errorf("ReadFile(Write(%+v)).Meta = %+v, want %+v", tt.meta, got.Meta, want)
			}
			if !bytes.Equal(got.Bytes(), tt.data) {
				t.Errorf("ReadFile(Write(%+v)).Bytes() = %x, want %x", tt.meta, got.Bytes(), tt.data)
			}
			switch tt.meta.Dtype {
			case "f32":
				if g := got.Float32(); !bytes.Equal(Float32Bytes(g), tt.data) || got.Float64() != nil {
					t.Errorf("Float32() = %v, Float64() = %v, want the data and nil", g, got.Float64())
				}
			case "f64":
				if g := got.Float64(); !bytes.Equal(Float64Bytes(g), tt.data) || got.Float32() != nil {
					t.Errorf("Float64() = %v, Float32() = %v, want the data and nil", g, got.Float32())
				}
			case "i64":
				if got.Float32() != nil || got.Float64() != nil {
					t.Errorf("Float32(), Float64() of i64 = %v, %v, want nil, nil", got.Float32(), got.Float64())
				}
			}
			got.Release()
			got.Release() // idempotent
			if got.Bytes() != nil {
				t.Errorf("Bytes() after Release = %x, want nil", got.Bytes())
			}
		})
	}
}

// The file carries the canonical extension exactly as a reader that does
// not know tilepipe's Go type sees it.
func TestCanonicalExtensionOnDisk(t *testing.T) {
	b := encode(t, baseMeta("f32", 2, 3), make([]byte, 24))
	if err := arrow.UnregisterExtensionType(ExtensionName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := arrow.RegisterExtensionType(newType(arrow.PrimitiveTypes.Float32, []int{1})); err != nil {
			t.Fatal(err)
		}
	})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fr, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	f := fr.Schema().Field(0)
	if want := arrow.FixedSizeListOf(6, arrow.PrimitiveTypes.Float32); !arrow.TypeEqual(f.Type, want) {
		t.Errorf("storage type = %s, want %s", f.Type, want)
	}
	for k, want := range map[string]string{
		"ARROW:extension:name":     "arrow.fixed_shape_tensor",
		"ARROW:extension:metadata": `{"shape":[2,3]}`,
	} {
		if got, ok := f.Metadata.GetValue(k); !ok || got != want {
			t.Errorf("field metadata %s = %q, %v, want %q", k, got, ok, want)
		}
	}
	md := fr.Schema().Metadata()
	for k, want := range map[string]string{
		"tilepipe.name": "A", "tilepipe.role": "input", "tilepipe.dtype": "f32",
		"tilepipe.case": "gemm-2x3x4", "tilepipe.generator": "normal", "tilepipe.seed": "7",
	} {
		if got, ok := md.GetValue(k); !ok || got != want {
			t.Errorf("schema metadata %s = %q, %v, want %q", k, got, ok, want)
		}
	}
}

func TestReadWithPyarrow(t *testing.T) {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import pyarrow").Run(); err != nil {
		t.Skip("pyarrow not available")
	}
	path := filepath.Join(t.TempDir(), "t.arrow")
	if err := os.WriteFile(path, encode(t, baseMeta("f32", 2, 3), Float32Bytes([]float32{0, 1, 2, 3, 4, 5})), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import sys, pyarrow as pa
t = pa.ipc.open_file(sys.argv[1]).read_all()
ty = t.schema.field(0).type
a = t.column(0).chunk(0).to_numpy_ndarray()
print(ty.extension_name, list(ty.shape), t.schema.metadata[b"tilepipe.dtype"].decode(), a.shape, a.ravel().tolist())
`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("pyarrow: %v\n%s", err, out)
	}
	want := "arrow.fixed_shape_tensor [2, 3] f32 (1, 2, 3) [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("pyarrow read = %s, want %s", got, want)
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		meta Meta
		data []byte
		want string
	}{
		{baseMeta("f32", 2, 3), make([]byte, 20), "write tensor A: 20 bytes, shape [2 3] wants 24"},
		{baseMeta("f64", 2, 3), make([]byte, 24), "write tensor A: 24 bytes, shape [2 3] wants 48"},
		{baseMeta("f8", 2), make([]byte, 4), `write tensor A: dtype "f8": want f32, f64, i64, f16 or bf16`},
		{baseMeta("f32", 0, 3), nil, "write tensor A: shape [0 3]: want dimensions >= 1 and at most 2147483647 elements"},
		{baseMeta("f32", -1, -2), make([]byte, 8), "write tensor A: shape [-1 -2]: want dimensions >= 1 and at most 2147483647 elements"},
		{baseMeta("f32", 65536, 65536), nil, "write tensor A: shape [65536 65536]: want dimensions >= 1 and at most 2147483647 elements"},
		{baseMeta("f32", 1<<62, 1<<62), nil, "write tensor A: shape [4611686018427387904 4611686018427387904]: want dimensions >= 1 and at most 2147483647 elements"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		err := Write(&buf, tt.meta, tt.data)
		if errString(err) != tt.want {
			t.Errorf("Write(%v %v, %d bytes) = %v, want %s", tt.meta.Dtype, tt.meta.Shape, len(tt.data), err, tt.want)
		}
		if buf.Len() != 0 {
			t.Errorf("Write(%v %v, %d bytes) wrote %d bytes, want none", tt.meta.Dtype, tt.meta.Shape, len(tt.data), buf.Len())
		}
	}
}

// forged describes a tensor file built by hand, to break one thing at a time.
type forged struct {
	column     string
	elem       arrow.DataType
	shape      []int
	listSize   int32
	plain      bool // storage type without the extension
	extraCol   bool
	meta       map[string]string
	fieldMeta  map[string]string // the tensor column's own metadata
	dropMeta   string
	rows       int
	batches    int
	nullElem   bool
	nullTensor bool
}

func goodForged() forged {
	return forged{
		column: Column, elem: arrow.PrimitiveTypes.Float32, shape: []int{2, 3}, listSize: 6,
		meta: map[string]string{}, rows: 1, batches: 1,
	}
}

func (f forged) build(t testing.TB) []byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	var typ arrow.DataType = &FixedShapeType{ExtensionBase: arrow.ExtensionBase{Storage: arrow.FixedSizeListOf(f.listSize, f.elem)}, Shape: f.shape}
	if f.plain {
		typ = arrow.FixedSizeListOf(f.listSize, f.elem)
	}
	md := map[string]string{
		"tilepipe.name": "A", "tilepipe.role": "input", "tilepipe.dtype": "f32",
		"tilepipe.case": "c", "tilepipe.generator": "normal", "tilepipe.seed": "7",
	}
	for k, v := range f.meta {
		md[k] = v
	}
	delete(md, f.dropMeta)
	fields := []arrow.Field{{Name: f.column, Type: typ, Nullable: true, Metadata: arrow.MetadataFrom(f.fieldMeta)}}
	if f.extraCol {
		fields = append(fields, arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int32})
	}
	amd := arrow.MetadataFrom(md)
	schema := arrow.NewSchema(fields, &amd)

	var buf bytes.Buffer
	fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	for range f.batches {
		b := array.NewFixedSizeListBuilder(mem, f.listSize, f.elem)
		for r := range f.rows {
			if f.nullTensor && r == 0 {
				b.AppendNull()
				continue
			}
			b.Append(true)
			for i := range int(f.listSize) {
				if f.nullElem && i == 0 {
					b.ValueBuilder().AppendNull()
					continue
				}
				switch vb := b.ValueBuilder().(type) {
				case *array.Float32Builder:
					vb.Append(float32(i))
				case *array.Float64Builder:
					vb.Append(float64(i))
				case *array.Int64Builder:
					vb.Append(int64(i))
				case *array.Int32Builder:
					vb.Append(int32(i))
				default:
					t.Fatalf("forged: element type %s", f.elem)
				}
			}
		}
		storage := b.NewArray()
		b.Release()
		var col arrow.Array = storage
		if !f.plain {
			col = array.NewExtensionArrayWithStorage(typ.(arrow.ExtensionType), storage)
			storage.Release()
		}
		cols := []arrow.Array{col}
		if f.extraCol {
			ib := array.NewInt32Builder(mem)
			for range f.rows {
				ib.Append(1)
			}
			cols = append(cols, ib.NewArray())
			ib.Release()
		}
		rec := array.NewRecordBatch(schema, cols, int64(f.rows))
		for _, c := range cols {
			c.Release()
		}
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFieldMarker: every tensor column carries its dtype in its own field
// metadata, and a bf16 column how to decode it, so a reader that looks at
// the column (pyarrow's schema.field("tensor").metadata) cannot take bf16
// bits for integers.
func TestFieldMarker(t *testing.T) {
	for _, dtype := range []string{"f32", "bf16"} {
		b := encode(t, baseMeta(dtype, 2), make([]byte, 2*map[string]int{"f32": 4, "bf16": 2}[dtype]))
		fr, err := ipc.NewFileReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		md := fr.Schema().Field(0).Metadata
		want := map[string]string{"tilepipe.dtype": dtype}
		if dtype == "bf16" {
			want["tilepipe.decode"] = DecodeBF16
		}
		for k, v := range want {
			if i := md.FindKey(k); i < 0 || md.Values()[i] != v {
				t.Errorf("%s column field metadata %v: want %s = %q", dtype, md, k, v)
			}
		}
		fr.Close()
	}
}

func TestReadViolations(t *testing.T) {
	// Errors of the extension type surface through Arrow's schema decoding.
	const schemaErr = "arrow ipc: arrow/ipc: could not decode schema: arrow/ipc: could not read schema: arrow/ipc: could not convert field 0 from flatbuf: arrow/ipc: could not convert field type: "
	valid := encode(t, baseMeta("f32", 2, 3), make([]byte, 24))
	rnd := make([]byte, 512)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range rnd {
		rnd[i] = byte(r.Uint32())
	}
	tests := []struct {
		name string
		file func(t *testing.T) []byte
		want string
	}{
		{"valid forged", func(t *testing.T) []byte { return goodForged().build(t) }, "<nil>"},
		{"dtype disagrees with element type", func(t *testing.T) []byte {
			f := goodForged()
			f.meta["tilepipe.dtype"] = "f64"
			return f.build(t)
		}, "column tensor: element type fixed_size_list<item: float32, nullable>[6] disagrees with tilepipe.dtype f64"},
		{"element type not a tilepipe dtype", func(t *testing.T) []byte {
			f := goodForged()
			f.elem = arrow.PrimitiveTypes.Int32
			return f.build(t)
		}, "column tensor: element type fixed_size_list<item: int32, nullable>[6] disagrees with tilepipe.dtype f32"},
		{"column marked with another dtype", func(t *testing.T) []byte {
			f := goodForged()
			f.fieldMeta = map[string]string{"tilepipe.dtype": "bf16"}
			return f.build(t)
		}, `column tensor: field metadata tilepipe.dtype "bf16" disagrees with tilepipe.dtype f32`},
		{"bf16 decode note on an f32 column", func(t *testing.T) []byte {
			f := goodForged()
			f.fieldMeta = map[string]string{"tilepipe.decode": DecodeBF16}
			return f.build(t)
		}, `column tensor: field metadata tilepipe.decode "` + DecodeBF16 + `" disagrees with tilepipe.dtype f32`},
		{"unknown dtype", func(t *testing.T) []byte {
			f := goodForged()
			f.meta["tilepipe.dtype"] = "f8"
			return f.build(t)
		}, `schema metadata tilepipe.dtype: dtype "f8": want f32, f64, i64, f16 or bf16`},
		{"shape disagrees with list size", func(t *testing.T) []byte {
			f := goodForged()
			f.shape = []int{2, 2}
			return f.build(t)
		}, schemaErr + "arrow.fixed_shape_tensor: shape [2 2] has 4 elements, list size is 6"},
		{"negative dimension", func(t *testing.T) []byte {
			f := goodForged()
			f.shape = []int{-2, -3}
			return f.build(t)
		}, schemaErr + "arrow.fixed_shape_tensor metadata: shape [-2 -3] out of range"},
		{"shape over the element limit", func(t *testing.T) []byte {
			f := goodForged()
			f.shape = []int{1 << 13, 1 << 13, 1 << 13}
			return f.build(t)
		}, schemaErr + "arrow.fixed_shape_tensor metadata: shape [8192 8192 8192] has more than 2147483647 elements"},
		{"missing seed", func(t *testing.T) []byte {
			f := goodForged()
			f.dropMeta = "tilepipe.seed"
			return f.build(t)
		}, "schema metadata: missing tilepipe.seed"},
		{"missing dtype", func(t *testing.T) []byte {
			f := goodForged()
			f.dropMeta = "tilepipe.dtype"
			return f.build(t)
		}, "schema metadata: missing tilepipe.dtype"},
		{"bad seed", func(t *testing.T) []byte {
			f := goodForged()
			f.meta["tilepipe.seed"] = "-1"
			return f.build(t)
		}, `schema metadata tilepipe.seed: strconv.ParseUint: parsing "-1": invalid syntax`},
		{"two record batches", func(t *testing.T) []byte {
			f := goodForged()
			f.batches = 2
			return f.build(t)
		}, "record batches: want 1, got 2"},
		{"no record batch", func(t *testing.T) []byte {
			f := goodForged()
			f.batches = 0
			return f.build(t)
		}, "record batches: want 1, got 0"},
		{"two rows", func(t *testing.T) []byte {
			f := goodForged()
			f.rows = 2
			return f.build(t)
		}, "rows: want 1, got 2"},
		{"null element", func(t *testing.T) []byte {
			f := goodForged()
			f.nullElem = true
			return f.build(t)
		}, "column tensor: 1 null elements"},
		{"null tensor", func(t *testing.T) []byte {
			f := goodForged()
			f.nullTensor = true
			return f.build(t)
		}, "column tensor: null tensor"},
		{"plain fixed-size list", func(t *testing.T) []byte {
			f := goodForged()
			f.plain = true
			return f.build(t)
		}, "column tensor: want extension arrow.fixed_shape_tensor, got fixed_size_list<item: float32, nullable>[6]"},
		{"wrong column name", func(t *testing.T) []byte {
			f := goodForged()
			f.column = "x"
			return f.build(t)
		}, `schema: want one column "tensor", got schema:`},
		{"two columns", func(t *testing.T) []byte {
			f := goodForged()
			f.extraCol = true
			return f.build(t)
		}, `schema: want one column "tensor", got schema:`},
		{"truncated", func(t *testing.T) []byte { return valid[:len(valid)-10] }, "arrow ipc: arrow/ipc: could not decode footer: arrow/ipc: not an Arrow file"},
		{"truncated to the header", func(t *testing.T) []byte { return valid[:8] }, "arrow ipc: arrow/ipc: could not decode footer: arrow/ipc: file too small (size=8)"},
		{"random bytes", func(t *testing.T) []byte { return rnd }, "arrow ipc: arrow/ipc: could not decode footer: arrow/ipc: not an Arrow file"},
		{"empty", func(t *testing.T) []byte { return nil }, "arrow ipc: arrow/ipc: could not decode footer: arrow/ipc: file too small (size=0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			got, err := read(bytes.NewReader(tt.file(t)), mem)
			if got != nil {
				defer got.Release()
			}
			// Schema dumps are long; for those compare the first line.
			msg := errString(err)
			if strings.HasSuffix(tt.want, "got schema:") {
				msg, _, _ = strings.Cut(msg, "\n")
			}
			if msg != tt.want {
				t.Errorf("read(%s) = %v, want %s", tt.name, err, tt.want)
			}
		})
	}
}

func TestReadFileNamesThePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.arrow")
	f := goodForged()
	f.rows = 2
	if err := os.WriteFile(path, f.build(t), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path, nil)
	if want := "tensor " + path + ": rows: want 1, got 2"; errString(err) != want {
		t.Errorf("ReadFile(%s) = %v, want %s", path, err, want)
	}
	missing := filepath.Join(dir, "missing.arrow")
	_, err = ReadFile(missing, nil)
	if want := "open " + missing + ": no such file or directory"; errString(err) != want {
		t.Errorf("ReadFile(%s) = %v, want %s", missing, err, want)
	}
}

func TestExtensionType(t *testing.T) {
	a := newType(arrow.PrimitiveTypes.Float32, []int{2, 3})
	if got, want := a.Serialize(), `{"shape":[2,3]}`; got != want {
		t.Errorf("Serialize() = %s, want %s", got, want)
	}
	tests := []struct {
		other arrow.ExtensionType
		want  bool
	}{
		{newType(arrow.PrimitiveTypes.Float32, []int{2, 3}), true},
		{newType(arrow.PrimitiveTypes.Float32, []int{3, 2}), false},
		{newType(arrow.PrimitiveTypes.Float64, []int{2, 3}), false},
	}
	for _, tt := range tests {
		if got := a.ExtensionEquals(tt.other); got != tt.want {
			t.Errorf("ExtensionEquals(%s) = %v, want %v", tt.other.Serialize(), got, tt.want)
		}
	}
	deser := []struct {
		storage arrow.DataType
		data    string
		want    string
	}{
		{arrow.FixedSizeListOf(6, arrow.PrimitiveTypes.Float32), `{"shape":[2,3]}`, "<nil>"},
		{arrow.FixedSizeListOf(6, arrow.PrimitiveTypes.Float32), `{"shape":`, "arrow.fixed_shape_tensor metadata: unexpected end of JSON input"},
		{arrow.PrimitiveTypes.Float32, `{"shape":[1]}`, "arrow.fixed_shape_tensor storage: want fixed_size_list, got float32"},
		{arrow.FixedSizeListOf(1, arrow.PrimitiveTypes.Float32), `{"shape":[2048,2048,2048,0]}`, "arrow.fixed_shape_tensor metadata: shape [2048 2048 2048 0] has more than 2147483647 elements"},
		{arrow.FixedSizeListOf(1, arrow.PrimitiveTypes.Float32), `{"shape":[2147483648]}`, "arrow.fixed_shape_tensor metadata: shape [2147483648] out of range"},
		{arrow.FixedSizeListOf(1, arrow.PrimitiveTypes.Float32), `{"shape":[0]}`, "arrow.fixed_shape_tensor: shape [0] has 0 elements, list size is 1"},
	}
	for _, tt := range deser {
		_, err := a.Deserialize(tt.storage, tt.data)
		if errString(err) != tt.want {
			t.Errorf("Deserialize(%s, %s) = %v, want %s", tt.storage, tt.data, err, tt.want)
		}
	}
}

func FuzzReadTensor(f *testing.F) {
	f.Add(encode(f, baseMeta("f32", 2, 3), Float32Bytes([]float32{1, 2, 3, 4, 5, 6})))
	f.Add(encode(f, baseMeta("f64", 3), Float64Bytes([]float64{1, 2, 3})))
	f.Add(encode(f, baseMeta("i64", 1, 2), make([]byte, 16)))
	f.Add(encode(f, baseMeta("f32"), make([]byte, 4)))
	two := goodForged()
	two.rows = 2
	f.Add(two.build(f))
	nul := goodForged()
	nul.nullElem = true
	f.Add(nul.build(f))
	f.Add([]byte("ARROW1\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		got, err := read(bytes.NewReader(b), mem)
		if err != nil {
			// Arrow does not release what it held when it fails inside a
			// record batch (it recovers its own panics, and read recovers
			// the rest); the Go allocator's GC reclaims it. Error paths of
			// read's own checks are leak-checked in TestReadViolations.
			return
		}
		defer mem.AssertSize(t, 0)
		defer got.Release()
		_, size, err := valueType(got.Meta.Dtype)
		if err != nil {
			t.Fatalf("read accepted dtype %q: %v", got.Meta.Dtype, err)
		}
		if len(got.Bytes()) != got.Meta.Elems()*size {
			t.Fatalf("read = %d bytes, shape %v of %s wants %d", len(got.Bytes()), got.Meta.Shape, got.Meta.Dtype, got.Meta.Elems()*size)
		}
		// What read accepts, Write reproduces and read accepts again.
		again, err := read(bytes.NewReader(encode(t, got.Meta, got.Bytes())), mem)
		if err != nil {
			t.Fatalf("read(Write(read(b))) = %v", err)
		}
		defer again.Release()
		if !reflect.DeepEqual(again.Meta, got.Meta) || !bytes.Equal(again.Bytes(), got.Bytes()) {
			t.Fatalf("read(Write(read(b))) = %+v, want %+v", again.Meta, got.Meta)
		}
	})
}
