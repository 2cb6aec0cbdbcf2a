package export

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/klauspost/compress/zstd"
)

// writeParquet writes rec as one Parquet file (format 2, the subset every
// reader reads): one row group, a column chunk per field, each one
// version-1 data page of PLAIN values compressed with zstd; a nullable
// field is optional, with a definition level per row (RLE), and only its
// valid values are stored. int32, int64 and float64 map to INT32, INT64
// and DOUBLE, strings to BYTE_ARRAY annotated as strings (UTF8 and the
// STRING logical type), so readers (pyarrow, DuckDB, pandas, arrow-go's
// pqarrow) recover the Arrow types from the Parquet schema alone.
//
// It is tilepipe's own, about 250 lines: arrow-go's parquet package
// brought 18 MB into a 44.6 MB binary (its encodings import arrow/compute,
// and pqarrow arrow/flight and gRPC), which the GPU machine receives on
// every run (issue 28). The tests read what it writes with pqarrow, an
// independent reader.
func writeParquet(w io.Writer, rec arrow.RecordBatch) error {
	fields := rec.Schema().Fields()
	cols := make([]pqColumn, len(fields))
	for i, f := range fields {
		c, err := pqColumnOf(f)
		if err != nil {
			return err
		}
		cols[i] = c
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		return err
	}
	defer enc.Close()
	out := &countingWriter{w: w}
	if _, err := out.Write([]byte("PAR1")); err != nil {
		return err
	}
	rows := rec.NumRows()
	var total int64
	if rows > 0 {
		for i := range cols {
			c := &cols[i]
			body, err := c.page(rec.Column(i))
			if err != nil {
				return fmt.Errorf("column %s: %w", c.name, err)
			}
			packed := enc.EncodeAll(body, nil)
			var h thrift
			h.i32(1, 0) // DATA_PAGE
			h.i32(2, int32(len(body)))
			h.i32(3, int32(len(packed)))
			h.begin(5)            // DataPageHeader
			h.i32(1, int32(rows)) // values, nulls included
			h.i32(2, 0)           // PLAIN
			h.i32(3, 3)           // definition levels: RLE
			h.i32(4, 3)           // repetition levels: RLE
			h.end()
			h.stop()
			c.offset = out.n
			if _, err := out.Write(h.b); err != nil {
				return err
			}
			if _, err := out.Write(packed); err != nil {
				return err
			}
			c.compressed, c.uncompressed = int64(len(h.b)+len(packed)), int64(len(h.b)+len(body))
			total += c.uncompressed
		}
	}
	meta := fileMetaData(cols, rows, total)
	if _, err := out.Write(meta); err != nil {
		return err
	}
	var tail [8]byte
	binary.LittleEndian.PutUint32(tail[:4], uint32(len(meta)))
	copy(tail[4:], "PAR1")
	_, err = out.Write(tail[:])
	return err
}

// pqColumn is one column's Parquet schema and, once written, its chunk.
type pqColumn struct {
	name                     string
	typ                      int32 // INT32 1, INT64 2, DOUBLE 5, BYTE_ARRAY 6
	optional                 bool
	utf8                     bool
	offset                   int64
	compressed, uncompressed int64
}

func pqColumnOf(f arrow.Field) (pqColumn, error) {
	c := pqColumn{name: f.Name, optional: f.Nullable}
	switch f.Type.ID() {
	case arrow.INT32:
		c.typ = 1
	case arrow.INT64:
		c.typ = 2
	case arrow.FLOAT64:
		c.typ = 5
	case arrow.STRING:
		c.typ, c.utf8 = 6, true
	default:
		return c, fmt.Errorf("column %s: type %s has no Parquet mapping here", f.Name, f.Type)
	}
	return c, nil
}

// page is a data page's body, uncompressed: the definition levels of an
// optional column (a 4-byte length, then RLE runs of bit width 1), then
// the valid values, PLAIN (little-endian numbers; a string as a 4-byte
// length and its bytes).
func (c pqColumn) page(col arrow.Array) ([]byte, error) {
	var b []byte
	if c.optional {
		levels := rleLevels(col)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(levels)))
		b = append(b, levels...)
	} else if col.NullN() > 0 {
		return nil, fmt.Errorf("%d nulls in a required column", col.NullN())
	}
	for i := range col.Len() {
		if col.IsNull(i) {
			continue
		}
		switch a := col.(type) {
		case *array.Int32:
			b = binary.LittleEndian.AppendUint32(b, uint32(a.Value(i)))
		case *array.Int64:
			b = binary.LittleEndian.AppendUint64(b, uint64(a.Value(i)))
		case *array.Float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Value(i)))
		case *array.String:
			s := a.Value(i)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		default:
			return nil, fmt.Errorf("array %T has no Parquet mapping here", col)
		}
	}
	return b, nil
}

// rleLevels is col's definition levels (1 valid, 0 null) in the RLE /
// bit-packing hybrid, as RLE runs only: each run its length shifted left
// once (the low bit 0 says RLE), then its value in one byte.
func rleLevels(col arrow.Array) []byte {
	var b []byte
	for i := 0; i < col.Len(); {
		v := col.IsValid(i)
		j := i
		for j < col.Len() && col.IsValid(j) == v {
			j++
		}
		b = binary.AppendUvarint(b, uint64(j-i)<<1)
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		i = j
	}
	return b
}

// fileMetaData is the file's footer: the schema (a root group of the
// columns), the row count, and the row group of column chunks (none for
// no rows).
func fileMetaData(cols []pqColumn, rows, total int64) []byte {
	var t thrift
	t.i32(1, 1) // version
	t.list(2, tStruct, len(cols)+1)
	t.elem()
	t.str(4, "schema")
	t.i32(5, int32(len(cols)))
	t.stop()
	for _, c := range cols {
		t.elem()
		t.i32(1, c.typ)
		rep := int32(0) // REQUIRED
		if c.optional {
			rep = 1 // OPTIONAL
		}
		t.i32(3, rep)
		t.str(4, c.name)
		if c.utf8 {
			t.i32(6, 0) // converted type UTF8
			t.begin(10) // LogicalType
			t.begin(1)  // STRING
			t.end()
			t.end()
		}
		t.stop()
	}
	t.i64(3, rows)
	if rows == 0 {
		t.list(4, tStruct, 0)
	} else {
		t.list(4, tStruct, 1)
		t.elem()
		t.list(1, tStruct, len(cols))
		for _, c := range cols {
			t.elem()
			t.i64(2, c.offset)
			t.begin(3) // ColumnMetaData
			t.i32(1, c.typ)
			t.list(2, tI32, 2)
			t.varint(0) // PLAIN
			t.varint(3) // RLE
			t.list(3, tBinary, 1)
			t.bytes(c.name)
			t.i32(4, 6) // ZSTD
			t.i64(5, rows)
			t.i64(6, c.uncompressed)
			t.i64(7, c.compressed)
			t.i64(9, c.offset)
			t.end()
			t.stop()
		}
		t.i64(2, total)
		t.i64(3, rows)
		t.stop()
	}
	t.str(6, "tilepipe")
	t.stop()
	return t.b
}

// thrift writes Thrift's compact protocol: a field's header is the delta
// from the struct's previous field id with its type (or the type, then
// the id), integers zigzag varints, strings their length and bytes, a
// list its size and element type; a struct ends with a stop byte.
type thrift struct {
	b    []byte
	last []int16 // the previous field id of each open struct, innermost last
}

// Compact protocol types.
const (
	tI32    = 5
	tI64    = 6
	tBinary = 8
	tList   = 9
	tStruct = 12
)

func (t *thrift) field(id int16, typ byte) {
	if len(t.last) == 0 {
		t.last = []int16{0}
	}
	prev := &t.last[len(t.last)-1]
	if d := id - *prev; d > 0 && d <= 15 {
		t.b = append(t.b, byte(d)<<4|typ)
	} else {
		t.b = append(t.b, typ)
		t.b = binary.AppendVarint(t.b, int64(id))
	}
	*prev = id
}

func (t *thrift) varint(v int64) { t.b = binary.AppendVarint(t.b, v) } // zigzag
func (t *thrift) bytes(s string) {
	t.b = binary.AppendUvarint(t.b, uint64(len(s)))
	t.b = append(t.b, s...)
}
func (t *thrift) i32(id int16, v int32)  { t.field(id, tI32); t.varint(int64(v)) }
func (t *thrift) i64(id int16, v int64)  { t.field(id, tI64); t.varint(v) }
func (t *thrift) str(id int16, s string) { t.field(id, tBinary); t.bytes(s) }

// begin opens a struct-valued field; end closes it.
func (t *thrift) begin(id int16) {
	t.field(id, tStruct)
	t.last = append(t.last, 0)
}
func (t *thrift) end() {
	t.b = append(t.b, 0)
	t.last = t.last[:len(t.last)-1]
}

// stop ends the top-level struct or a struct element of a list.
func (t *thrift) stop() {
	t.b = append(t.b, 0)
	if len(t.last) > 1 {
		t.last = t.last[:len(t.last)-1]
	} else {
		t.last = []int16{0}
	}
}

// list opens a list field of n elements of type elem.
func (t *thrift) list(id int16, elem byte, n int) {
	t.field(id, tList)
	if n < 15 {
		t.b = append(t.b, byte(n)<<4|elem)
	} else {
		t.b = append(t.b, 0xF0|elem)
		t.b = binary.AppendUvarint(t.b, uint64(n))
	}
}

// elem opens a struct element of a list (closed by stop).
func (t *thrift) elem() { t.last = append(t.last, 0) }

// countingWriter counts what it writes (the chunks' offsets).
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
