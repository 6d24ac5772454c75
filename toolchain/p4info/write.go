package p4info

import (
	"fmt"
	"path/filepath"
	"strings"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Format is a P4Info file format.
type Format int

// P4Info formats, chosen like p4c by the file extension.
const (
	Text Format = iota
	JSON
	Binary
)

// FormatFor picks the format of a P4Info file from its name: .json is
// JSON, .bin is binary protobuf, anything else (.txt, .txtpb) text.
func FormatFor(path string) Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return JSON
	case ".bin", ".pb":
		return Binary
	}
	return Text
}

// ParseFormat reads a --p4runtime-format value.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "text", "txt", "txtpb":
		return Text, nil
	case "json":
		return JSON, nil
	case "binary", "bin":
		return Binary, nil
	}
	return Text, fmt.Errorf("unknown P4Info format %q (text, json or binary)", s)
}

// Marshal renders a P4Info in the given format.
func Marshal(info *p4v1.P4Info, f Format) ([]byte, error) {
	switch f {
	case JSON:
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(info)
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	case Binary:
		return proto.Marshal(info)
	}
	b := marshalText(info.ProtoReflect())
	header := "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"
	return append([]byte(header), b...), nil
}
