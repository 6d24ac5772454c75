package engine

// Custom CRCs: BMv2's crc16_custom and crc32_custom algorithms, whose
// parameters the control plane may change while packets flow (BMv2's
// bm_set_crc16_custom_parameters / bm_set_crc32_custom_parameters, the CLI's
// set_crc16_parameters / set_crc32_parameters). Each calculation using one
// has its own parameters, starting from the plain crc16's or crc32's. A
// change builds a new table off the packet path and swaps one pointer, so a
// packet sees either the old parameters or the new, and the packet path
// neither locks nor allocates.

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// crcModel is one CRC in the usual parametrised form (width, polynomial in
// normal, MSB-first notation, initial remainder, final xor, whether input
// bytes and the final remainder are bit-reversed), computed a byte at a
// time from a 256-entry table.
type crcModel struct {
	width  int
	params pipeline.CRCParams
	mask   uint64
	table  [256]uint64
}

func newCRCModel(width int, p pipeline.CRCParams) *crcModel {
	m := &crcModel{width: width, mask: mask64(width)}
	p.Polynomial &= m.mask
	p.Initial &= m.mask
	p.FinalXor &= m.mask
	m.params = p
	top := uint64(1) << (width - 1)
	for i := range m.table {
		r := uint64(i) << (width - 8)
		for range 8 {
			if r&top != 0 {
				r = r<<1 ^ p.Polynomial
			} else {
				r <<= 1
			}
		}
		m.table[i] = r & m.mask
	}
	return m
}

func (m *crcModel) sum(b []byte) uint64 {
	r := m.params.Initial
	shift := m.width - 8
	for _, x := range b {
		if m.params.ReflectData {
			x = bits.Reverse8(x)
		}
		r = (m.table[byte(r>>shift)^x] ^ r<<8) & m.mask
	}
	if m.params.ReflectRemainder {
		r = bits.Reverse64(r) >> (64 - m.width)
	}
	return r ^ m.params.FinalXor
}

// customCRCDefaults are the parameters a crc16_custom or crc32_custom
// calculation starts with: those of crc16 (CRC-16/ARC) and crc32 (IEEE),
// as in BMv2.
var customCRCDefaults = map[int]pipeline.CRCParams{
	16: {Polynomial: 0x8005, ReflectData: true, ReflectRemainder: true},
	32: {Polynomial: 0x04c11db7, Initial: 0xffffffff, FinalXor: 0xffffffff, ReflectData: true, ReflectRemainder: true},
}

// customCRC is one calculation's changeable CRC.
type customCRC struct {
	width int
	model atomic.Pointer[crcModel]
}

func customCRCWidth(algo string) int {
	switch algo {
	case "crc16_custom":
		return 16
	case "crc32_custom":
		return 32
	}
	return 0
}

func newCustomCRC(width int) (*customCRC, hashAlgo) {
	c := &customCRC{width: width}
	c.model.Store(newCRCModel(width, customCRCDefaults[width]))
	return c, func(_ *Packet, b []byte) uint64 { return c.model.Load().sum(b) }
}

// Errors of SetCustomCRC, told apart as BMv2's Thrift runtime tells them.
var (
	ErrNoCalculation = errors.New("no such calculation")
	ErrNotCustomCRC  = errors.New("not a custom CRC of that width")
)

// SetCustomCRC changes the parameters of the named calculation (one of the
// JSON's "calculations"), which must use crc16_custom (width 16) or
// crc32_custom (width 32).
func (pl *Pipeline) SetCustomCRC(name string, width int, p pipeline.CRCParams) error {
	calc, ok := pl.calcByName[name]
	if !ok {
		return fmt.Errorf("calculation %q: %w", name, ErrNoCalculation)
	}
	if calc.custom == nil || calc.custom.width != width {
		return fmt.Errorf("calculation %q uses %s: %w (crc%d_custom)", name, calc.algoNm, ErrNotCustomCRC, width)
	}
	calc.custom.model.Store(newCRCModel(width, p))
	return nil
}

// CustomCRC returns the parameters the named custom CRC calculation uses now.
func (pl *Pipeline) CustomCRC(name string) (width int, p pipeline.CRCParams, err error) {
	calc, ok := pl.calcByName[name]
	if !ok {
		return 0, p, fmt.Errorf("calculation %q: %w", name, ErrNoCalculation)
	}
	if calc.custom == nil {
		return 0, p, fmt.Errorf("calculation %q uses %s: %w", name, calc.algoNm, ErrNotCustomCRC)
	}
	return calc.custom.width, calc.custom.model.Load().params, nil
}
