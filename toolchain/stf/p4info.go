package stf

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ReadP4Info reads a P4Info file; the format follows the extension
// (.txtpb/.txt: text, .json: JSON, .bin/.pb: binary), as p4c writes them.
func ReadP4Info(path string) (*p4configv1.P4Info, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	info := &p4configv1.P4Info{}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".bin", ".pb":
		err = proto.Unmarshal(data, info)
	case ".json":
		err = protojson.Unmarshal(data, info)
	default:
		err = prototext.Unmarshal(data, info)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return info, nil
}

// ComparableP4Info returns a copy of info with documentation removed and
// every repeated message field sorted, so that two P4Infos describing the
// same program compare equal whatever their order.
func ComparableP4Info(info *p4configv1.P4Info) *p4configv1.P4Info {
	c := proto.Clone(info).(*p4configv1.P4Info)
	normalize(c.ProtoReflect())
	return c
}

func normalize(m protoreflect.Message) {
	var clearFields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "p4.config.v1.Documentation" {
			clearFields = append(clearFields, fd)
			return true
		}
		if fd.Name() == "doc" {
			clearFields = append(clearFields, fd)
			return true
		}
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				normalize(l.Get(i).Message())
			}
			sortList(l)
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					normalize(mv.Message())
				}
				return true
			})
		case fd.Kind() == protoreflect.MessageKind:
			normalize(v.Message())
		}
		return true
	})
	for _, fd := range clearFields {
		m.Clear(fd)
	}
}

func sortList(l protoreflect.List) {
	n := l.Len()
	type item struct {
		key []byte
		v   protoreflect.Value
	}
	items := make([]item, n)
	opts := proto.MarshalOptions{Deterministic: true}
	for i := 0; i < n; i++ {
		v := l.Get(i)
		b, _ := opts.Marshal(v.Message().Interface())
		items[i] = item{key: b, v: v}
	}
	sort.SliceStable(items, func(i, j int) bool { return bytes.Compare(items[i].key, items[j].key) < 0 })
	// Rebuild: copy the messages out first, since setting reuses storage.
	msgs := make([]proto.Message, n)
	for i, it := range items {
		msgs[i] = proto.Clone(it.v.Message().Interface())
	}
	for i := 0; i < n; i++ {
		l.Set(i, protoreflect.ValueOfMessage(msgs[i].ProtoReflect()))
	}
}

// DiffP4Info compares two P4Info files, ignoring documentation and order.
// It returns "" when they match, else a short description of the first
// difference.
func DiffP4Info(got, want *p4configv1.P4Info) string {
	g, w := ComparableP4Info(got), ComparableP4Info(want)
	if proto.Equal(g, w) {
		return ""
	}
	gt := strings.Split(prototext.MarshalOptions{Multiline: true}.Format(g), "\n")
	wt := strings.Split(prototext.MarshalOptions{Multiline: true}.Format(w), "\n")
	for i := 0; i < len(gt) || i < len(wt); i++ {
		var a, b string
		if i < len(gt) {
			a = strings.TrimSpace(gt[i])
		}
		if i < len(wt) {
			b = strings.TrimSpace(wt[i])
		}
		if a != b {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, a, b)
		}
	}
	return "differs"
}
