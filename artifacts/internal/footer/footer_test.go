package footer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// validFile is an Arrow IPC file whose footer schema has metadata, two
// fields, field metadata and a nested child.
func validFile(t *testing.T) []byte {
	t.Helper()
	smd := arrow.NewMetadata([]string{"k"}, []string{"v"})
	fmd := arrow.NewMetadata([]string{"fk"}, []string{"fv"})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32, Metadata: fmd},
		{Name: "l", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)},
	}, &smd)
	mem := memory.NewGoAllocator()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int32Builder).Append(1)
	lb := b.Field(1).(*array.FixedSizeListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{1, 2}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// locate returns the file offset of the footer and a checker over it.
func locate(t *testing.T, file []byte) (int, *checker) {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(file[len(file)-tailLen:]))
	start := len(file) - tailLen - n
	return start, &checker{b: file[start : start+n]}
}

// lengthAt is the footer position of the length of a table's vector field.
func lengthAt(t *testing.T, c *checker, table uint32, voff uint16) uint32 {
	t.Helper()
	pos, err := c.field(table, voff)
	if err != nil || pos == 0 {
		t.Fatalf("field %d of table %d: %d, %v", voff, table, pos, err)
	}
	v, err := c.indirect(pos)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheck(t *testing.T) {
	file := validFile(t)
	start, c := locate(t, file)
	root, _ := c.u32(0)
	sp, _ := c.field(root, footerSchema)
	schema, _ := c.indirect(sp)
	fieldsLen := lengthAt(t, c, schema, schemaFields)
	field0, _ := c.indirect(fieldsLen + 4)
	field1, _ := c.indirect(fieldsLen + 8)
	n := len(c.b)

	tests := []struct {
		name  string
		at    uint32 // footer position of the vector length to forge
		value uint32
		limit int64
		want  string
	}{
		{name: "valid", limit: 1 << 20, want: "<nil>"},
		{name: "footer over limit", limit: int64(n - 1), want: fmt.Sprintf("footer: %d bytes, limit %d", n, n-1)},
		{name: "schema fields", at: fieldsLen, value: 1 << 30, limit: 1 << 20, want: fmt.Sprintf("footer: schema fields: 1073741824 entries cannot fit in %d bytes", n)},
		{name: "schema metadata", at: lengthAt(t, c, schema, schemaCustomMeta), value: 0xffffffff, limit: 1 << 20, want: fmt.Sprintf("footer: schema metadata: 4294967295 entries cannot fit in %d bytes", n)},
		{name: "field metadata", at: lengthAt(t, c, field0, fieldCustomMetadata), value: 1 << 20, limit: 1 << 20, want: fmt.Sprintf("footer: field metadata: 1048576 entries cannot fit in %d bytes", n)},
		{name: "field children", at: lengthAt(t, c, field1, fieldChildren), value: 1 << 20, limit: 1 << 20, want: fmt.Sprintf("footer: field children: 1048576 entries cannot fit in %d bytes", n)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := bytes.Clone(file)
			if tt.at != 0 {
				binary.LittleEndian.PutUint32(f[start+int(tt.at):], tt.value)
			}
			err := Check(bytes.NewReader(f), int64(len(f)), tt.limit)
			got := "<nil>"
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Check(%s) = %s, want %s", tt.name, got, tt.want)
			}
		})
	}
}

// Every field visit counts, so a footer whose fields share one table many
// times over cannot make the walk (or Arrow's after it) explode.
func TestCheckFieldBudget(t *testing.T) {
	const n = MaxFields + 1
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u16 := func(v uint16) { b = binary.LittleEndian.AppendUint16(b, v) }
	// 0: schema vtable: size 8, table size 8, endianness absent, fields at +4.
	u16(8)
	u16(8)
	u16(0)
	u16(4)
	// 8: schema table, its vtable 8 bytes back; 12: fields vector at 16.
	u32(8)
	u32(4)
	// 16: n offsets, all to one field table after them.
	u32(n)
	field := uint32(20 + 4*n)
	for i := range uint32(n) {
		u32(field - (20 + 4*i))
	}
	// The field table, its (empty) vtable right after it.
	u32(uint32(0xfffffffc)) // soffset -4
	u16(4)
	u16(4)
	c := &checker{b: b}
	err := c.fieldList(8, schemaFields, "schema fields")
	want := fmt.Sprintf("schema: more than %d fields", MaxFields)
	if err == nil || err.Error() != want {
		t.Errorf("fieldList(%d shared fields) = %v, want %s", n, err, want)
	}
	// One fewer is within the budget.
	binary.LittleEndian.PutUint32(b[16:], n-1)
	c = &checker{b: b}
	if err := c.fieldList(8, schemaFields, "schema fields"); err != nil {
		t.Errorf("fieldList(%d shared fields) = %v, want nil", n-1, err)
	}
}

func TestCheckPassesWhatArrowReports(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("short"), bytes.Repeat([]byte("x"), 64), append(bytes.Repeat([]byte{0}, 20), "\xff\xff\xff\x7fARROW1"...)} {
		if err := Check(bytes.NewReader(b), int64(len(b)), 1<<20); err != nil {
			t.Errorf("Check(%q) = %v, want nil (left to Arrow)", b, err)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte("ARROW1\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = Check(bytes.NewReader(b), int64(len(b)), 1<<20)
	})
}

// TestCheckBlocks: a record batch block that claims a body, a message or an
// offset beyond the file is refused before Arrow allocates for it; so is a
// block vector longer than the footer.
func TestCheckBlocks(t *testing.T) {
	file := validFile(t)
	start, c := locate(t, file)
	root, _ := c.u32(0)
	blocks := lengthAt(t, c, root, footerRecordBatches)
	at := start + int(blocks) + 4 // the first block
	off := int64(binary.LittleEndian.Uint64(file[at:]))
	meta := int64(binary.LittleEndian.Uint32(file[at+8:]))
	size := int64(len(file))
	for _, tc := range []struct {
		name  string
		pos   int // byte offset in the block
		width int
		value uint64
		want  string
	}{
		{"body beyond the file", 16, 8, 1 << 34, fmt.Sprintf("footer: record batch 0: offset %d, message %d bytes, body 17179869184 bytes: not inside the file's %d bytes", off, meta, size)},
		{"negative body", 16, 8, 1 << 63, fmt.Sprintf("footer: record batch 0: offset %d, message %d bytes, body -9223372036854775808 bytes: not inside the file's %d bytes", off, meta, size)},
		{"offset beyond the file", 0, 8, uint64(size + 1), fmt.Sprintf("footer: record batch 0: offset %d, message %d bytes, body", size+1, meta)},
		{"message beyond the file", 8, 4, uint64(size), fmt.Sprintf("footer: record batch 0: offset %d, message %d bytes, body", off, size)},
		{"vector longer than the footer", -4, 4, 1 << 20, fmt.Sprintf("footer: record batch blocks: 1048576 entries cannot fit in %d bytes", len(c.b))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := bytes.Clone(file)
			if tc.width == 8 {
				binary.LittleEndian.PutUint64(f[at+tc.pos:], tc.value)
			} else {
				binary.LittleEndian.PutUint32(f[at+tc.pos:], uint32(tc.value))
			}
			err := Check(bytes.NewReader(f), size, 1<<20)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Check = %v, want %s", err, tc.want)
			}
		})
	}
	if err := Check(bytes.NewReader(file), size, 1<<20); err != nil {
		t.Errorf("Check(valid) = %v", err)
	}
}
