package main

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/asm"
)

func TestNetworkOrderIsTheKernelsLayout(t *testing.T) {
	tests := []struct {
		port uint16
		want [4]byte // remote_port's bytes in memory: 0, 0, then the port big-endian
	}{
		{5432, [4]byte{0, 0, 0x15, 0x38}},
		{443, [4]byte{0, 0, 0x01, 0xbb}},
		{65535, [4]byte{0, 0, 0xff, 0xff}},
	}
	for _, tc := range tests {
		var got [4]byte
		binary.NativeEndian.PutUint32(got[:], networkOrder(tc.port))
		if got != tc.want {
			t.Errorf("port %d: bytes %v, want %v", tc.port, got, tc.want)
		}
	}
}

func TestProgramComparesEveryPortThenPasses(t *testing.T) {
	insns := dropRemotePorts([]uint16{5432, 9559})
	jumps := 0
	for _, ins := range insns {
		if ins.OpCode.JumpOp() == asm.JEq {
			jumps++
			// the word compared may have its top bit set (a port whose low byte is
			// 128 or more): a 64-bit comparison would sign-extend the immediate
			if ins.OpCode.Class() != asm.Jump32Class {
				t.Errorf("%v: a 64-bit comparison, want JMP32", ins)
			}
		}
	}
	if jumps != 2 {
		t.Errorf("%d comparisons, want one per port", jumps)
	}
	if insns[0].OpCode.Class() != asm.LdXClass || insns[0].Offset != remotePortOffset {
		t.Errorf("first instruction %v, want the load of remote_port", insns[0])
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--cgroup", "/nonexistent-cgroup", "--port", "5432"},
		{"--cgroup", "/tmp", "--port", "0"},
		{"--cgroup", "/tmp", "--port", "70000"},
		{"--cgroup", "/tmp"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
