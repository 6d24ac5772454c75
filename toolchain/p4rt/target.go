package p4rt

import (
	"context"
	"time"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// This file is the contract between the P4Runtime server and the device it
// programs (toolchain/device implements it for terrapin-switch; loopback.go
// in this package's tests implements it in-process over the engine).
//
// The server is a thin translation: it validates P4Runtime messages against
// the P4Info, resolves ids to the BMv2 JSON names the P4Info names, keeps
// what only P4Runtime has to read back (cookies, metadata, entries' and
// replicas' forms as written), and calls PipelineControl; table entries,
// meter configurations, multicast groups, clone sessions, value sets and
// action profile members' actions it reads back from the device. It never touches packets beyond the controller
// header of PacketIn/PacketOut.

// Target is the device as the P4Runtime server sees it. Methods may be
// called from several goroutines; the server serializes the pipeline
// lifecycle (Prepare/Commit) itself.
type Target interface {
	// PreparePipeline compiles deviceConfig, the BMv2 JSON bytes exactly as
	// simple_switch_grpc takes them in ForwardingPipelineConfig, into a
	// pipeline that does not forward yet. The forwarding pipeline is not
	// affected. An error means the config cannot be realized: the server
	// answers INVALID_ARGUMENT with the error's text.
	PreparePipeline(ctx context.Context, deviceConfig []byte) (PreparedPipeline, error)

	// InjectPacketOut sends frame into the ingress pipeline as if it had
	// arrived on the CPU port (standard_metadata.ingress_port = CPU port),
	// as simple_switch_grpc does with a PacketOut. frame starts with the
	// @controller_header("packet_out") header the server built from the
	// PacketOut metadata (no header when the program declares none). The
	// device may keep frame. An error (no pipeline, device stopping) is
	// reported to the client as a stream error, never fatal.
	InjectPacketOut(frame []byte) error

	// SetControllerSink registers where frames the pipeline sends to the
	// CPU port go (they become PacketIn). The frame starts with the
	// @controller_header("packet_in") header if the program has one. The
	// device calls sink from its own goroutine; sink copies what it keeps
	// and never blocks, so a slow controller never stalls forwarding. A nil
	// sink drops such frames. The server calls this once, before serving.
	SetControllerSink(sink func(frame []byte))

	// SetDigestSink registers where digest messages (v1model digest(), BMv2
	// learn lists) go. Same rules as SetControllerSink.
	SetDigestSink(sink func(pipeline.Digest))
}

// PreparedPipeline is a compiled pipeline waiting to be committed. Its
// Control is usable before Commit so that RECONCILE_AND_COMMIT can replay
// the existing forwarding state into it, making the switch-over atomic.
type PreparedPipeline interface {
	Control() PipelineControl
	// Schema describes the loaded program (its objects by JSON name and id,
	// its declared entries). The server checks the P4Info against it, so
	// the device config is parsed once, by the device.
	Schema() pipeline.Schema
	// Commit makes this pipeline the one forwarding packets, atomically
	// replacing the previous one (packets in flight finish on the old one).
	Commit() error
	// Discard releases a pipeline that will not be committed (VERIFY, or a
	// failed reconcile).
	Discard()
}

// PipelineControl is the control API of one loaded pipeline: the engine's
// control API as the server uses it. Names are BMv2 JSON names (tables,
// actions, counter/meter/register arrays); action arguments are
// fixed-width big-endian byte strings in parameter order.
//
// Priorities follow P4Runtime: a larger number wins (as the engine's
// control API does; BMv2's runtime uses the opposite order).
//
// Package p4rt/enginetarget adapts an *engine.Pipeline to this interface
// (enginetarget.Control) and provides an in-process Target over the engine.
//
// Errors: return a plain error for "this cannot be done"; the server maps
// it to the right P4Runtime code from context. Errors wrapping a gRPC
// status (status.Error) keep their code, for the few cases only the
// engine can tell, e.g. RESOURCE_EXHAUSTED for a full table.
type PipelineControl interface {
	// Entries are identified by their key and priority (0 for tables
	// without ternary/range/optional fields), as in P4Runtime.
	AddEntry(table string, key []pipeline.Match, priority int32, action string, args [][]byte) error
	ModifyEntry(table string, key []pipeline.Match, priority int32, action string, args [][]byte) error
	DeleteEntry(table string, key []pipeline.Match, priority int32) error
	// Entries returns the table's entries as the device holds them, in the
	// order they were added (the program's declared entries first), each
	// with its direct counter and meter; Entry returns the one with this
	// key and priority, ok false when there is none. Keys are normalised
	// as the device matches them (fixed width; an lpm value masked to its
	// prefix; a don't-care field Wildcard). An action is named by its JSON
	// id (pipeline.Schema's ids), since p4c may emit one action name
	// several times; an indirect table's entry names its member or group.
	// The server keeps no copy of entries: it reads them here.
	Entries(table string) ([]pipeline.TableEntry, error)
	Entry(table string, key []pipeline.Match, priority int32) (e pipeline.TableEntry, ok bool, err error)
	// SetDefaultAction changes the action run on a miss;
	// ResetDefaultAction restores the program's. DefaultAction reads the
	// one in force, by JSON action id as Entries does (ok false: none).
	// SetEntryTimeout gives an entry of a table that supports timeouts
	// its idle timeout (0: none) and restarts its idle time; the device
	// rounds it up to what it can measure. Entries and Entry read it back
	// with the time since the entry was last hit (TableEntry.Ageing).
	SetEntryTimeout(table string, key []pipeline.Match, priority int32, timeout time.Duration) error

	SetDefaultAction(table string, action string, args [][]byte) error
	ResetDefaultAction(table string) error
	DefaultAction(table string) (a pipeline.ActionCall, ok bool, err error)

	// Direct resources of an entry (the table's direct counter / meter).
	ReadDirectCounter(table string, key []pipeline.Match, priority int32) (pipeline.CounterData, error)
	WriteDirectCounter(table string, key []pipeline.Match, priority int32, v pipeline.CounterData) error
	// SetDirectMeter configures the entry's meter; nil restores the default
	// (every packet GREEN).
	SetDirectMeter(table string, key []pipeline.Match, priority int32, c *pipeline.MeterConfig) error
	// DirectMeter reads back the entry's meter configuration exactly as
	// set (nil: the default).
	DirectMeter(table string, key []pipeline.Match, priority int32) (*pipeline.MeterConfig, error)

	// Indexed externs; index is within [0, size).
	ReadCounter(counter string, index int64) (pipeline.CounterData, error)
	WriteCounter(counter string, index int64, v pipeline.CounterData) error
	SetMeter(meter string, index int64, c *pipeline.MeterConfig) error
	// Meter reads back one cell's configuration exactly as set (nil: the
	// default).
	Meter(meter string, index int64) (*pipeline.MeterConfig, error)
	ReadRegister(register string, index int64) ([]byte, error)
	WriteRegister(register string, index int64, value []byte) error

	// Packet replication engine.
	SetMulticastGroup(group uint32, replicas []pipeline.Replica) error
	DeleteMulticastGroup(group uint32) error
	SetCloneSession(session uint32, s pipeline.CloneSession) error
	DeleteCloneSession(session uint32) error
	// The groups and sessions as set (replicas in order), ok false when
	// there is none; the ids of all of them, ascending.
	MulticastGroup(group uint32) (replicas []pipeline.Replica, ok bool)
	MulticastGroups() []uint32
	CloneSession(session uint32) (s pipeline.CloneSession, ok bool)
	CloneSessions() []uint32

	// Action profiles and selectors (BMv2 JSON action_profiles). The
	// server checks P4Runtime's rules (ids, sizes, references) first; the
	// control only applies. A member is an action of the profile's
	// tables; a group lists members, each taken with equal weight.
	SetProfileMember(profile string, member uint32, action string, args [][]byte) error
	DeleteProfileMember(profile string, member uint32) error
	SetProfileGroup(profile string, group uint32, members []uint32) error
	DeleteProfileGroup(profile string, group uint32) error
	// ProfileMembers reads back the profile's members as set, each
	// member's action by JSON id as Entries names actions.
	ProfileMembers(profile string) (map[uint32]pipeline.ActionCall, error)
	// Entries of a table with an action profile name a member or group
	// of it instead of an action.
	AddIndirectEntry(table string, key []pipeline.Match, priority int32, ref pipeline.IndirectRef) error
	ModifyIndirectEntry(table string, key []pipeline.Match, priority int32, ref pipeline.IndirectRef) error

	// SetValueSet replaces the members of a parser value set; ValueSet
	// reads them back as set, in order.
	SetValueSet(valueSet string, members []pipeline.ValueSetMember) error
	ValueSet(valueSet string) ([]pipeline.ValueSetMember, error)
}
