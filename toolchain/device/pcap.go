package device

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// pcapWriter appends frames to a classic libpcap file (microsecond
// timestamps, LINKTYPE_ETHERNET), as BMv2's --pcap does per port.
type pcapWriter struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	hdr [16]byte
	err error
}

const pcapSnapLen = 65535

func createPcap(dir, name string) (*pcapWriter, error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("pcap: %w", err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	var gh [24]byte
	binary.LittleEndian.PutUint32(gh[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(gh[4:], 2)
	binary.LittleEndian.PutUint16(gh[6:], 4)
	binary.LittleEndian.PutUint32(gh[16:], pcapSnapLen)
	binary.LittleEndian.PutUint32(gh[20:], 1) // LINKTYPE_ETHERNET
	if _, err := w.Write(gh[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("pcap: %w", err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("pcap: %w", err)
	}
	return &pcapWriter{f: f, w: w}, nil
}

// write records one frame; errors are kept, reported at close, and stop
// further writes (a full disk must not stop forwarding).
func (p *pcapWriter) write(t time.Time, frame []byte) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.err == nil {
		us := t.UnixMicro()
		binary.LittleEndian.PutUint32(p.hdr[0:], uint32(us/1e6))
		binary.LittleEndian.PutUint32(p.hdr[4:], uint32(us%1e6))
		binary.LittleEndian.PutUint32(p.hdr[8:], uint32(len(frame)))
		binary.LittleEndian.PutUint32(p.hdr[12:], uint32(len(frame)))
		if _, err := p.w.Write(p.hdr[:]); err != nil {
			p.err = err
		} else if _, err := p.w.Write(frame); err != nil {
			p.err = err
		}
	}
	p.mu.Unlock()
}

// flush pushes buffered records to the file so readers see them while the
// switch runs (tutorial workflows read pcaps of a live switch).
func (p *pcapWriter) flush() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.err == nil && p.w.Buffered() > 0 {
		p.err = p.w.Flush()
	}
	p.mu.Unlock()
}

func (p *pcapWriter) close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = p.w.Flush()
	}
	cerr := p.f.Close()
	if p.err != nil {
		return p.err
	}
	return cerr
}
