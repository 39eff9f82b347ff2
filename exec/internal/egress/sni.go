package egress

import (
	"encoding/binary"
	"errors"
	"io"
)

// maxRecord is the largest TLS record a ClientHello may come in
// (2^14 bytes of plaintext, plus a little the standard allows).
const maxRecord = 1<<14 + 256

// readClientHello reads one TLS record from r, which must hold a
// ClientHello, and returns the record's bytes (to be sent on unchanged)
// and the server name it asks for ("" if it names none). A ClientHello
// split over several records is refused: no client in use sends one.
func readClientHello(r io.Reader) (record []byte, serverName string, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, "", errors.New("no TLS record came")
	}
	if hdr[0] != 22 || hdr[1] != 3 {
		return nil, "", errors.New("what came is not a TLS handshake")
	}
	n := int(binary.BigEndian.Uint16(hdr[3:]))
	if n > maxRecord {
		return nil, "", errors.New("the TLS record is too long")
	}
	record = make([]byte, 5+n)
	copy(record, hdr[:])
	if _, err := io.ReadFull(r, record[5:]); err != nil {
		return nil, "", errors.New("the TLS record was cut short")
	}
	serverName, err = helloServerName(record[5:])
	return record, serverName, err
}

// helloServerName parses a handshake message that must be a whole
// ClientHello and returns its server_name extension's host name.
func helloServerName(b []byte) (string, error) {
	bad := errors.New("the TLS handshake is not a whole ClientHello")
	p := parser(b)
	typ, ok := p.u8()
	if !ok || typ != 1 {
		return "", bad
	}
	body, ok := p.bytes(3)
	if !ok || len(p) != 0 {
		return "", bad
	}
	// client_version, random, session_id, cipher_suites,
	// compression_methods, then the extensions.
	if _, ok = body.take(2 + 32); !ok {
		return "", bad
	}
	for _, size := range []int{1, 2, 1} {
		if _, ok = body.bytes(size); !ok {
			return "", bad
		}
	}
	if len(body) == 0 {
		return "", nil // no extensions at all
	}
	exts, ok := body.bytes(2)
	if !ok || len(body) != 0 {
		return "", bad
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.bytes(2)
		if !ok1 || !ok2 {
			return "", bad
		}
		if typ != 0 { // server_name
			continue
		}
		list, ok := data.bytes(2)
		if !ok {
			return "", bad
		}
		for len(list) > 0 {
			kind, ok1 := list.u8()
			name, ok2 := list.bytes(2)
			if !ok1 || !ok2 {
				return "", bad
			}
			if kind == 0 { // host_name
				return string(name), nil
			}
		}
		return "", nil
	}
	return "", nil
}

// parser reads big-endian fields off the front of a byte slice.
type parser []byte

func (p *parser) take(n int) (parser, bool) {
	if n > len(*p) {
		return nil, false
	}
	out := (*p)[:n]
	*p = (*p)[n:]
	return out, true
}

func (p *parser) u8() (uint8, bool) {
	b, ok := p.take(1)
	if !ok {
		return 0, false
	}
	return b[0], true
}

func (p *parser) u16() (uint16, bool) {
	b, ok := p.take(2)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint16(b), true
}

// bytes reads a length of size bytes (1, 2 or 3), then that many bytes.
func (p *parser) bytes(size int) (parser, bool) {
	l, ok := p.take(size)
	if !ok {
		return nil, false
	}
	n := 0
	for _, c := range l {
		n = n<<8 | int(c)
	}
	return p.take(n)
}
