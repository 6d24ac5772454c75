package p4rt

import (
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// pipelineState is everything the server knows about one pipeline: the
// config as the client sent it, the schema derived from it, the engine
// control, and what P4Runtime reads back that the device does not hold.
// Table entries and default actions, meter configs, multicast groups,
// clone sessions, value sets and profile members' actions are read from
// the device; what is here is P4Runtime's alone: cookies and metadata,
// forms as written, digest configs, action profiles' membership and the
// references to it.
type pipelineState struct {
	config   *p4v1.ForwardingPipelineConfig
	program  []byte // the BMv2 JSON, decoded from config's p4_device_config
	schema   *schema
	prepared PreparedPipeline
	ctl      PipelineControl

	tables map[uint32]*tableState
	// What P4Runtime reads back of multicast groups and clone sessions
	// that the device does not hold (it holds their replicas and settings).
	mcastAs   map[uint32]writtenAs
	clonesAs  map[uint32]writtenAs
	digestCfg map[uint32]*p4v1.DigestEntry_Config
	profiles  map[uint32]*profileState
}

// profileState is what an action profile holds, as P4Runtime reads it
// back, with the references that keep members and groups from being
// deleted while in use (spec §9.2.1, §9.2.2).
type profileState struct {
	members map[uint32]*memberState
	groups  map[uint32]*groupState
	// internal has the ids the server gave the members and groups of
	// one-shot action sets (oneshot.go).
	internal internalIDs
}

// memberState is what P4Runtime alone knows of a member: the references
// to it. Its action is on the device (memberActions).
type memberState struct {
	inGroups int // groups listing it
	inTables int // table entries naming it
}

type groupState struct {
	members  []*p4v1.ActionProfileGroup_Member // as written
	maxSize  int32
	inTables int
}

func newPipelineState(cfg *p4v1.ForwardingPipelineConfig, s *schema, prepared PreparedPipeline) *pipelineState {
	ps := &pipelineState{
		config:    cfg,
		schema:    s,
		prepared:  prepared,
		ctl:       prepared.Control(),
		tables:    map[uint32]*tableState{},
		mcastAs:   map[uint32]writtenAs{},
		clonesAs:  map[uint32]writtenAs{},
		digestCfg: map[uint32]*p4v1.DigestEntry_Config{},
		profiles:  map[uint32]*profileState{},
	}
	for _, id := range s.profileIDs {
		ps.profiles[id] = &profileState{members: map[uint32]*memberState{}, groups: map[uint32]*groupState{},
			internal: internalIDs{members: map[uint32]bool{}, groups: map[uint32]bool{}}}
	}
	for _, id := range s.tableIDs {
		ps.tables[id] = &tableState{meta: map[string]entryMeta{}}
	}
	return ps
}
