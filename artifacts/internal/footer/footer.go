package footer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFields bounds the fields (with children, counted per visit) of a
// footer schema; tilepipe's files have a handful.
const MaxFields = 1024

const (
	magic   = "ARROW1"
	tailLen = 4 + len(magic) // int32 footer length, then the magic
)

// vtable offsets of the flatbuffer fields Arrow reads (Footer.fbs,
// Schema.fbs).
const (
	footerSchema        = 6
	footerDictionaries  = 8
	footerRecordBatches = 10
	schemaFields        = 6
	schemaCustomMeta    = 8
	fieldChildren       = 14
	fieldCustomMetadata = 16
)

// Check reads the footer of the Arrow IPC file r of size bytes. It returns
// an error for a footer larger than limit, one whose schema vectors cannot
// be what they claim, or one with a block (a record batch or dictionary)
// that does not lie inside the file: Arrow's reader allocates a block's
// body before it reads it, so a claimed body beyond the file would cost
// memory the file does not have. Files too malformed to have a footer pass:
// Arrow's reader reports those itself.
func Check(r io.ReaderAt, size, limit int64) error {
	if size < int64(tailLen)+8 {
		return nil
	}
	var tail [tailLen]byte
	if _, err := r.ReadAt(tail[:], size-int64(tailLen)); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	if string(tail[4:]) != magic {
		return nil
	}
	n := int64(int32(binary.LittleEndian.Uint32(tail[:4])))
	if n <= 0 || n > size-int64(tailLen) {
		return nil
	}
	if n > limit {
		return fmt.Errorf("footer: %d bytes, limit %d", n, limit)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-int64(tailLen)-n); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	c := &checker{b: buf, size: size}
	if err := c.check(); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	return nil
}

type checker struct {
	b      []byte
	size   int64 // of the whole file
	fields int
}

var errBounds = errors.New("offset outside the footer")

func (c *checker) u32(pos uint32) (uint32, error) {
	if uint64(pos)+4 > uint64(len(c.b)) {
		return 0, errBounds
	}
	return binary.LittleEndian.Uint32(c.b[pos:]), nil
}

func (c *checker) u16(pos uint32) (uint16, error) {
	if uint64(pos)+2 > uint64(len(c.b)) {
		return 0, errBounds
	}
	return binary.LittleEndian.Uint16(c.b[pos:]), nil
}

// field is flatbuffers' Table.Offset: the position of a table's field, or
// 0 when the field is absent.
func (c *checker) field(table uint32, voff uint16) (uint32, error) {
	so, err := c.u32(table)
	if err != nil {
		return 0, err
	}
	vt := uint32(int32(table) - int32(so))
	vsize, err := c.u16(vt)
	if err != nil {
		return 0, err
	}
	if voff >= vsize {
		return 0, nil
	}
	o, err := c.u16(vt + uint32(voff))
	if err != nil || o == 0 {
		return 0, err
	}
	return table + uint32(o), nil
}

// indirect follows the offset stored at pos.
func (c *checker) indirect(pos uint32) (uint32, error) {
	o, err := c.u32(pos)
	return pos + o, err
}

// vector returns the first element and length of a table's vector field of
// 4-byte elements, refusing a length that overruns the footer.
func (c *checker) vector(table uint32, voff uint16, what string) (uint32, int, error) {
	pos, err := c.field(table, voff)
	if err != nil || pos == 0 {
		return 0, 0, err
	}
	v, err := c.indirect(pos)
	if err != nil {
		return 0, 0, err
	}
	n, err := c.u32(v)
	if err != nil {
		return 0, 0, err
	}
	if room := (int64(len(c.b)) - int64(v) - 4) / 4; int64(n) > room {
		return 0, 0, fmt.Errorf("%s: %d entries cannot fit in %d bytes", what, n, len(c.b))
	}
	return v + 4, int(n), nil
}

func (c *checker) check() error {
	root, err := c.u32(0)
	if err != nil {
		return err
	}
	sp, err := c.field(root, footerSchema)
	if err != nil || sp == 0 {
		return err
	}
	schema, err := c.indirect(sp)
	if err != nil {
		return err
	}
	for _, b := range []struct {
		voff uint16
		what string
	}{{footerDictionaries, "dictionary"}, {footerRecordBatches, "record batch"}} {
		if err := c.blocks(root, b.voff, b.what); err != nil {
			return err
		}
	}
	if _, _, err := c.vector(schema, schemaCustomMeta, "schema metadata"); err != nil {
		return err
	}
	return c.fieldList(schema, schemaFields, "schema fields")
}

func (c *checker) fieldList(table uint32, voff uint16, what string) error {
	start, n, err := c.vector(table, voff, what)
	if err != nil {
		return err
	}
	for i := range n {
		c.fields++
		if c.fields > MaxFields {
			return fmt.Errorf("schema: more than %d fields", MaxFields)
		}
		f, err := c.indirect(start + 4*uint32(i))
		if err != nil {
			return err
		}
		if _, _, err := c.vector(f, fieldCustomMetadata, "field metadata"); err != nil {
			return err
		}
		if err := c.fieldList(f, fieldChildren, "field children"); err != nil {
			return err
		}
	}
	return nil
}

// blockLen is the size of a Block struct (Footer.fbs): offset int64,
// metaDataLength int32 and padding, bodyLength int64.
const blockLen = 24

// blocks checks a footer vector of Blocks: each one's message and body
// lie inside the file.
func (c *checker) blocks(root uint32, voff uint16, what string) error {
	pos, err := c.field(root, voff)
	if err != nil || pos == 0 {
		return err
	}
	v, err := c.indirect(pos)
	if err != nil {
		return err
	}
	n, err := c.u32(v)
	if err != nil {
		return err
	}
	if room := (int64(len(c.b)) - int64(v) - 4) / blockLen; int64(n) > room {
		return fmt.Errorf("%s blocks: %d entries cannot fit in %d bytes", what, n, len(c.b))
	}
	for i := range int64(n) {
		at := int64(v) + 4 + i*blockLen
		off := int64(binary.LittleEndian.Uint64(c.b[at:]))
		meta := int64(int32(binary.LittleEndian.Uint32(c.b[at+8:])))
		body := int64(binary.LittleEndian.Uint64(c.b[at+16:]))
		if off < 0 || meta < 0 || body < 0 || off > c.size || meta > c.size-off || body > c.size-off-meta {
			return fmt.Errorf("%s %d: offset %d, message %d bytes, body %d bytes: not inside the file's %d bytes", what, i, off, meta, body, c.size)
		}
	}
	return nil
}
