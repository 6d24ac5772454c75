// Package difftest is a differential check of terrapin-p4c against p4c:
// for every program of the STF corpus that has p4c's BMv2 JSON beside it
// (NAME.p4c.json), it compiles NAME.p4 with the bundled compiler, then
// drives the same sequence — the STF script's table entries, clone
// sessions and multicast groups, its own packets, and many random packets
// made from the program's parser (valid, truncated, mutated, garbage) on
// every port the script uses — through the engine twice, once per JSON,
// and requires the same frames on the same ports (a drop is no frame) and
// the same digests, packet by packet.
//
// The run is seeded: the same seed and packet count give the same packets.
// A difference names the program, the seed, the packet's index, port and
// bytes, and both outputs.
package difftest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/terrapin/terrapin/toolchain/compiler"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
	"github.com/terrapin/terrapin/toolchain/stf"
)

// Options configure a run.
type Options struct {
	Dir     string         // the corpus: NAME.p4, NAME.stf, NAME.p4c.json
	Packets int            // random packets per program (the script's own are sent too)
	Seed    uint64         // base seed; each program's stream also depends on its name
	Run     *regexp.Regexp // only programs whose name matches (nil: all)
	// Mutate, when set, rewrites our JSON before it runs (the tests plant
	// miscompiles with it).
	Mutate func(program string, ours []byte) []byte
	// MaxDiffs bounds the differences kept per program (default 3).
	MaxDiffs int
	// Known lists, per program, the kinds of packet (Packet.Kind) whose
	// differences are known and argued (known-differences.txt): those are
	// counted in Result.Known, not reported; "*" stands for every kind.
	Known map[string][]string
	// NoSeeds keeps the script's packets from the generator (they are
	// still sent): the random packets then come from the parser walk alone.
	NoSeeds bool
	Jobs    int // programs in parallel (0: GOMAXPROCS)
}

// Frame is one thing the switch did with a packet: a frame out of a port,
// a digest, or a crash of the engine.
type Frame struct {
	Kind string // "out", "digest", "panic"
	Port uint32
	Data []byte
	Text string // panic message
}

func (f Frame) String() string {
	switch f.Kind {
	case "out":
		return fmt.Sprintf("port %d: %X", f.Port, f.Data)
	case "digest":
		return fmt.Sprintf("digest %s", f.Text)
	}
	return "engine panic: " + f.Text
}

// Outcome is what one packet produced, frames ordered by port (the order
// within a port is the switch's; across ports BMv2 gives none).
type Outcome []Frame

func (o Outcome) String() string {
	if len(o) == 0 {
		return "dropped"
	}
	parts := make([]string, len(o))
	for i, f := range o {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

func (o Outcome) equal(p Outcome) bool {
	if len(o) != len(p) {
		return false
	}
	for i := range o {
		if o[i].Kind != p[i].Kind || o[i].Port != p[i].Port || !bytes.Equal(o[i].Data, p[i].Data) || o[i].Text != p[i].Text {
			return false
		}
	}
	return true
}

// Difference is one packet the two JSONs treat differently (or a script
// command one of them refuses).
type Difference struct {
	Program string
	Seed    uint64 // base seed of the run
	Packets int    // random packets per program in the run
	Index   int    // packet number in the program's sequence (0-based)
	Kind    string // how the packet was made: stf, walk, truncated, mutant, garbage
	Port    uint32
	Packet  []byte
	P4C     Outcome
	Ours    Outcome
	Setup   string // a script command's differing result, when not a packet's
}

func (d Difference) String() string {
	if d.Setup != "" {
		return fmt.Sprintf("%s (seed %d, %d packets): %s", d.Program, d.Seed, d.Packets, d.Setup)
	}
	return fmt.Sprintf("%s (seed %d, %d packets): packet #%d (%s) on port %d: %s\n    p4c:  %s\n    ours: %s",
		d.Program, d.Seed, d.Packets, d.Index, d.Kind, d.Port, strings.ToUpper(hex.EncodeToString(d.Packet)), d.P4C, d.Ours)
}

// Result is one program's run.
type Result struct {
	Program     string
	Sent        int // packets sent to each JSON
	Differences []Difference
	Known       int         // differences of the kinds Options.Known lists for the program
	KnownFirst  *Difference // the first of them
	Err         error       // the program could not be checked (compile, load, script)
}

// Programs lists the corpus programs that have p4c's JSON and an STF script.
func Programs(dir string) ([]string, error) {
	names, err := stf.Discover(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n+".p4c.json")); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Run checks every program of the corpus (those Run selects).
func Run(o Options) ([]Result, error) {
	names, err := Programs(o.Dir)
	if err != nil {
		return nil, err
	}
	names = stf.Select(names, o.Run)
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	results := make([]Result, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = RunProgram(o, names[i])
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	return results, nil
}

// ProgramSeed is the seed of one program's packet stream.
func ProgramSeed(base uint64, program string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(program))
	return base ^ h.Sum64()
}

// RunProgram checks one program.
func RunProgram(o Options, name string) (res Result) {
	res.Program = name
	defer func() {
		if r := recover(); r != nil {
			res.Err = fmt.Errorf("panic: %v", r)
		}
	}()
	maxDiffs := o.MaxDiffs
	if maxDiffs <= 0 {
		maxDiffs = 3
	}
	theirs, err := os.ReadFile(filepath.Join(o.Dir, name+".p4c.json"))
	if err != nil {
		res.Err = err
		return res
	}
	comp, errs := compiler.Compile(compiler.Options{Program: filepath.Join(o.Dir, name+".p4")})
	if len(errs) > 0 {
		res.Err = fmt.Errorf("terrapin-p4c: %v", errs[0])
		return res
	}
	ours := comp.JSON
	if o.Mutate != nil {
		ours = o.Mutate(name, ours)
	}
	script, err := os.ReadFile(filepath.Join(o.Dir, name+".stf"))
	if err != nil {
		res.Err = err
		return res
	}
	cmds, err := stf.ParseScript(bytes.NewReader(script))
	if err != nil {
		res.Err = fmt.Errorf("%s.stf: %v", name, err)
		return res
	}
	seq, packets, err := plan(theirs, cmds, o.Packets, ProgramSeed(o.Seed, name), !o.NoSeeds)
	if err != nil {
		res.Err = err
		return res
	}
	res.Sent = len(packets)
	want, wantErr := drive(name, theirs, seq)
	if want == nil {
		res.Err = fmt.Errorf("p4c's JSON: %v", wantErr)
		return res
	}
	got, gotErr := drive(name, ours, seq)
	if got == nil {
		res.Err = fmt.Errorf("our JSON: %v", gotErr)
		return res
	}
	if errText(wantErr) != errText(gotErr) {
		res.Differences = append(res.Differences, Difference{Program: name, Seed: o.Seed, Packets: o.Packets,
			Setup: fmt.Sprintf("the script runs differently: p4c's JSON: %s; ours: %s", errText(wantErr), errText(gotErr))})
	}
	known := o.Known[name]
	for i := 0; i < len(want) && i < len(got) && len(res.Differences) < maxDiffs; i++ {
		if !want[i].equal(got[i]) {
			p := packets[i]
			d := Difference{Program: name, Seed: o.Seed, Packets: o.Packets,
				Index: i, Kind: p.Kind, Port: p.Port, Packet: p.Data, P4C: want[i], Ours: got[i]}
			if slices.Contains(known, p.Kind) || slices.Contains(known, "*") {
				res.Known++
				if res.KnownFirst == nil {
					res.KnownFirst = &d
				}
				continue
			}
			res.Differences = append(res.Differences, d)
		}
	}
	return res
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// plan turns an STF script into the sequence both JSONs run: its control
// commands in order, its packets, and before the first packet after each
// change of the tables (and at the end, if the script ends with changes),
// a share of the random packets. Expectations and counter checks go: the
// two runs are compared with each other, not with the script.
func plan(programJSON []byte, cmds []stf.Command, n int, seed uint64, useSeeds bool) ([]stf.Command, []Packet, error) {
	keep := map[string]bool{"add": true, "setdefault": true, "remove": true, "mirroring_add": true,
		"mc_mgrp_create": true, "mc_node_create": true, "mc_node_associate": true}
	portSet := map[uint32]bool{}
	var seeds [][]byte
	for _, c := range cmds {
		switch c.Op {
		case "packet":
			portSet[c.Port] = true
			if b, err := hex.DecodeString(evenHex(c.Data)); err == nil && useSeeds {
				seeds = append(seeds, b)
			}
		case "expect":
			portSet[c.Port] = true
		}
	}
	var ports []uint32
	for p := range portSet {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	if len(ports) == 0 {
		ports = []uint32{0}
	}
	gen, err := NewGenerator(programJSON, ports, seeds)
	if err != nil {
		return nil, nil, fmt.Errorf("p4c's JSON: %v", err)
	}
	// Batches: one before each packet that follows a control command (or
	// starts the script), one at the end if controls follow the last packet.
	batches := 0
	dirty := true
	for _, c := range cmds {
		switch {
		case keep[c.Op]:
			dirty = true
		case c.Op == "packet" && dirty:
			batches++
			dirty = false
		}
	}
	if dirty {
		batches++
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5DEECE66D))
	var seq []stf.Command
	var packets []Packet
	left, per := n, n/batches
	batch := func() {
		k := per
		batches--
		if batches == 0 {
			k = left
		}
		left -= k
		for ; k > 0; k-- {
			p := gen.Next(r)
			packets = append(packets, p)
			seq = append(seq, stf.Command{Op: "packet", Port: p.Port, Data: hex.EncodeToString(p.Data)})
		}
	}
	dirty = true
	for _, c := range cmds {
		switch {
		case keep[c.Op]:
			seq = append(seq, c)
			dirty = true
		case c.Op == "packet":
			if dirty {
				batch()
				dirty = false
			}
			b, _ := hex.DecodeString(evenHex(c.Data))
			packets = append(packets, Packet{Port: c.Port, Data: b, Kind: "stf"})
			seq = append(seq, stf.Command{Op: "packet", Port: c.Port, Data: hex.EncodeToString(b), Line: c.Line})
		}
	}
	if dirty {
		batch()
	}
	return seq, packets, nil
}

// evenHex pads an odd-length STF hex string the way the STF runner reads
// it (the last digit a byte of its own).
func evenHex(s string) string {
	if len(s)%2 == 1 {
		return s[:len(s)-1] + "0" + s[len(s)-1:]
	}
	return s
}

// drive runs the sequence on one JSON and returns each packet's outcome.
// A nil slice means the JSON did not load; a script error stops the run
// (the outcomes so far are kept).
func drive(name string, programJSON []byte, seq []stf.Command) ([]Outcome, error) {
	rec := &recorder{}
	pl, err := engine.Load(programJSON, engine.Options{
		RandomSeed: 1,
		// A clock that moves 1 ms per packet: timestamps and meters see
		// the same times on both runs.
		Clock: func() int64 { return rec.now },
	})
	if err != nil {
		return nil, err
	}
	prog := &stf.Program{Name: name, JSON: programJSON, Model: pl}
	if err := rec.Start(prog); err != nil {
		return nil, err
	}
	err = stf.Run(rec, prog, seq, nil)
	if rec.outs == nil {
		rec.outs = []Outcome{}
	}
	return rec.outs, err
}

// recorder is an stf.Backend that keeps what each packet produced.
type recorder struct {
	pl   *engine.Pipeline
	now  int64
	outs []Outcome
}

func (r *recorder) Start(prog *stf.Program) error {
	r.pl = prog.Model
	return nil
}

func (r *recorder) AddEntry(t pipeline.TableInfo, e pipeline.TableEntry) error {
	return r.pl.AddEntry(t.ID, e)
}

func (r *recorder) DeleteEntry(t pipeline.TableInfo, match []pipeline.Match, priority int32) error {
	return r.pl.DeleteEntry(t.ID, match, priority)
}

func (r *recorder) SetDefault(t pipeline.TableInfo, a pipeline.ActionCall) error {
	return r.pl.SetDefaultAction(t.ID, a)
}

func (r *recorder) SetCloneSession(id uint32, s pipeline.CloneSession) error {
	return r.pl.SetCloneSession(id, s)
}

func (r *recorder) SetMulticastGroup(group uint32, replicas []pipeline.Replica) error {
	return r.pl.SetMulticastGroup(group, replicas)
}

func (r *recorder) ReadCounter(c pipeline.CounterInfo, index int) (pipeline.CounterData, error) {
	return r.pl.ReadCounter(c.ID, index)
}

func (r *recorder) ReadDirectCounter(t pipeline.TableInfo, match []pipeline.Match, priority int32) (pipeline.CounterData, error) {
	return r.pl.ReadDirectCounter(t.ID, match, priority)
}

// Send runs one packet and records its outcome; an engine panic is an
// outcome too (the other JSON may not crash).
func (r *recorder) Send(port uint32, frame []byte) error {
	r.now += 1_000_000
	var o Outcome
	func() {
		defer func() {
			if x := recover(); x != nil {
				o = append(o, Frame{Kind: "panic", Text: fmt.Sprint(x)})
			}
		}()
		r.pl.ProcessPacket(frame, port, func(p uint32, f []byte) {
			o = append(o, Frame{Kind: "out", Port: p, Data: append([]byte(nil), f...)})
		})
	}()
	for more := true; more; {
		select {
		case d := <-r.pl.Digests():
			parts := make([]string, len(d.Fields))
			for i, f := range d.Fields {
				parts[i] = fmt.Sprintf("%X", f)
			}
			o = append(o, Frame{Kind: "digest", Text: strings.Join(parts, " ")})
		default:
			more = false
		}
	}
	sort.SliceStable(o, func(i, j int) bool {
		if o[i].Kind != o[j].Kind {
			return o[i].Kind < o[j].Kind
		}
		return o[i].Port < o[j].Port
	})
	r.outs = append(r.outs, o)
	return nil
}

func (r *recorder) Wait() error                       { return nil }
func (r *recorder) Outputs() ([]stf.OutPacket, error) { return nil, nil }
func (r *recorder) Stop() error                       { return nil }
