package p4info

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// marshalText prints a message in protobuf text format the way protoc's
// C++ TextFormat does (and so p4c): fields in field-number order, nested
// messages as `name {`, two-space indentation, strings C-escaped with
// octal escapes. Go's prototext output is deliberately unstable, which
// would make generated files differ from run to run.
func marshalText(m protoreflect.Message) []byte {
	var b strings.Builder
	writeMessage(&b, m, 0)
	return []byte(b.String())
}

func writeMessage(b *strings.Builder, m protoreflect.Message, depth int) {
	// protoc prints set fields in field-number order
	var fds []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fds = append(fds, fd)
		return true
	})
	sort.Slice(fds, func(i, j int) bool { return fds[i].Number() < fds[j].Number() })
	indent := strings.Repeat("  ", depth)
	for _, fd := range fds {
		v := m.Get(fd)
		name := string(fd.Name())
		switch {
		case fd.IsMap():
			mp := v.Map()
			var keys []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				fmt.Fprintf(b, "%s%s {\n", indent, name)
				fmt.Fprintf(b, "%s  key: %s\n", indent, scalarText(fd.MapKey(), k.Value()))
				writeField(b, fd.MapValue(), "value", mp.Get(k), depth+1)
				fmt.Fprintf(b, "%s}\n", indent)
			}
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				writeField(b, fd, name, l.Get(i), depth)
			}
		default:
			writeField(b, fd, name, v, depth)
		}
	}
}

func writeField(b *strings.Builder, fd protoreflect.FieldDescriptor, name string, v protoreflect.Value, depth int) {
	indent := strings.Repeat("  ", depth)
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		fmt.Fprintf(b, "%s%s {\n", indent, name)
		writeMessage(b, v.Message(), depth+1)
		fmt.Fprintf(b, "%s}\n", indent)
		return
	}
	fmt.Fprintf(b, "%s%s: %s\n", indent, name, scalarText(fd, v))
}

func scalarText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return quote([]byte(v.String()))
	case protoreflect.BytesKind:
		return quote(v.Bytes())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return fmt.Sprint(int32(v.Enum()))
	case protoreflect.BoolKind:
		if v.Bool() {
			return "true"
		}
		return "false"
	}
	return v.String()
}

// quote escapes as protoc's CEscape does.
func quote(s []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, "\\%03o", c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
