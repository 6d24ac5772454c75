package p4rt

import (
	"encoding/json"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// A ForwardingPipelineConfig's p4_device_config reaches simple_switch_grpc
// in one of two encodings, and PI's DeviceMgr (proto/frontend's
// pipeline_config_set) tells them apart by trying the second first:
//
//   - the BMv2 JSON itself (p4runtime-shell, finsy, the P4Runtime spec's
//     own examples);
//   - PI's p4.tmp.P4DeviceConfig message wrapping it (p4/tmp/p4config.proto:
//     bool reassign = 1; Extras extras = 2, a map<string, string> kv = 1;
//     bytes device_data = 3), which p4lang's tutorials' p4runtime_lib and
//     PI's own demos send with reassign = true. PI logs it as deprecated but
//     takes it. A wrapper whose device_data is empty — and so an empty
//     p4_device_config, which decodes as an empty wrapper — is PI's legacy
//     form: VERIFY_AND_COMMIT then installs the P4Info over the program the
//     switch already runs (the JSON given on its command line).
//
// reassign and extras change nothing observable on BMv2 (its PI target
// ignores both), so they are decoded, checked and ignored here too.

// deviceConfig is a p4_device_config decoded as simple_switch_grpc does.
type deviceConfig struct {
	// json is the BMv2 JSON; nil for a wrapper without device_data.
	json []byte
	// wrapped: the bytes were a p4.tmp.P4DeviceConfig.
	wrapped  bool
	reassign bool
	extras   map[string]string
}

// decodeDeviceConfig reads p4_device_config. Bytes that are a JSON text are
// the JSON; otherwise bytes that decode as a P4DeviceConfig are one; and
// anything else is taken for JSON, whose parser then says what is wrong.
// (PI tries the wrapper first, so a JSON text that is also a well-formed
// protobuf — leading whitespace can make it one — would be misread by PI;
// no client sends that on purpose, and taking it as the JSON it is can
// only be what was meant.)
func decodeDeviceConfig(b []byte) deviceConfig {
	if len(b) > 0 && json.Valid(b) {
		return deviceConfig{json: b}
	}
	if dc, ok := decodeP4DeviceConfig(b); ok {
		return dc
	}
	return deviceConfig{json: b}
}

// P4DeviceConfig field numbers (p4/tmp/p4config.proto).
const (
	p4dcReassign   protowire.Number = 1
	p4dcExtras     protowire.Number = 2
	p4dcDeviceData protowire.Number = 3
	extrasKV       protowire.Number = 1
	mapKey         protowire.Number = 1
	mapValue       protowire.Number = 2
)

// decodeP4DeviceConfig decodes a p4.tmp.P4DeviceConfig as protobuf's parser
// does (it is what PI calls): the last occurrence of a field wins, unknown
// fields and known ones of an unexpected wire type are skipped, and
// malformed wire data or a string that is not UTF-8 (proto3) fails.
func decodeP4DeviceConfig(b []byte) (deviceConfig, bool) {
	dc := deviceConfig{wrapped: true}
	ok := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) bool {
		switch {
		case num == p4dcReassign && typ == protowire.VarintType:
			dc.reassign = n != 0
		case num == p4dcExtras && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, entry []byte, _ uint64) bool {
				if num != extrasKV || typ != protowire.BytesType {
					return true
				}
				var k, val string
				ok := eachField(entry, func(num protowire.Number, typ protowire.Type, s []byte, _ uint64) bool {
					if typ != protowire.BytesType || (num != mapKey && num != mapValue) {
						return true
					}
					if !utf8.Valid(s) {
						return false
					}
					if num == mapKey {
						k = string(s)
					} else {
						val = string(s)
					}
					return true
				})
				if ok {
					if dc.extras == nil {
						dc.extras = map[string]string{}
					}
					dc.extras[k] = val
				}
				return ok
			})
		case num == p4dcDeviceData && typ == protowire.BytesType:
			dc.json = v
		}
		return true
	})
	if !ok {
		return deviceConfig{}, false
	}
	if len(dc.json) == 0 {
		dc.json = nil
	}
	return dc, true
}

// eachField calls f for every field of the protobuf message in b: v holds
// a length-delimited field's bytes, n a varint's value. It reports false
// on malformed wire data or when f does.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return false
		}
		b = b[n:]
		if !f(num, typ, v, x) {
			return false
		}
	}
	return true
}
