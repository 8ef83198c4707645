package direct

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// The channel's wire is a stream of frames over one TLS connection, not
// gRPC: a call on it is the payload written by the caller's goroutine and
// the answer written by the handler's, with one hand-off on each side,
// where a gRPC call passes through three goroutines on each side (see
// BENCHMARKS.md). Each frame is
//
//	length uint32 (big-endian) | kind uint8 | call id uint64 | body
//
// where length counts the body alone. Calls are multiplexed: the caller
// numbers them, and the answers come back in whatever order they end.

// ALPN is the newest version of the framing, the one the TLS handshake
// agrees on when both sides speak it; a peer that speaks no version of
// ours fails the handshake instead of a call. Version 2 adds kindEndRun.
const ALPN = "wophost-direct/2"

// alpnV1 is the first version: calls, cancels and relayed calls. A side
// built before version 2 offers it alone, and both sides still speak it.
const alpnV1 = "wophost-direct/1"

// protocols are the versions this side speaks, newest first: the TLS
// server picks the first of its own list that the client offers.
func protocols() []string { return []string{ALPN, alpnV1} }

// frameKind says what a frame's body holds.
type frameKind uint8

const (
	// kindCall (pack → plugin): a DirectChannelInvokeRequest.
	kindCall frameKind = 1
	// kindCancel (pack → plugin): no body; the caller gave up on the call.
	kindCancel frameKind = 2
	// kindResult (plugin → caller): a DirectChannelInvokeResponse.
	kindResult frameKind = 3
	// kindError (plugin → caller): the call's ErrorDetail (the envelope).
	kindError frameKind = 4
	// kindRefused (plugin → caller): the grant (or the relay's MAC) was
	// not accepted and the call did not run; the body is the reason, as
	// text.
	kindRefused frameKind = 5
	// kindRelay (host → plugin): a call the host relays, a MAC of the
	// channel's key (32 bytes) then the InvokeRequest it signs. Its
	// answer is a kindResult, kindError or kindRefused frame; kindCancel
	// ends it.
	kindRelay frameKind = 6
	// kindEndRun (host → plugin, version 2): the host ends a run, a MAC of
	// the channel's key (32 bytes) then the EndRunRequest it signs. Its
	// answer is a kindResult whose result is the EndRunResponse, or a
	// kindRefused or kindError frame.
	kindEndRun frameKind = 7
	// kindExecute (host → pack): a node run, a MAC of the pack channel's
	// key (32 bytes) then the ExecuteRequest it signs. Only a pack's
	// channel (NewExecuteEndpoint) serves it, and it serves nothing
	// else; the pack opens it when the host asks (OpenExecuteChannel), so
	// it needs no version of the framing of its own. Its answer is a
	// kindResult whose result is the ExecuteResponse, the node's failure
	// included, or a kindRefused or kindError frame; kindCancel ends it.
	kindExecute frameKind = 8
)

// writeTimeout bounds one frame's write on either side. A peer whose
// process is alive but no longer reads its side of the channel would
// otherwise hold every writer of the connection; past it the connection
// fails, and its calls with it.
const writeTimeout = 30 * time.Second

// headerBytes is the length of a frame's header.
const headerBytes = 13

// frame is one frame read off a connection.
type frame struct {
	kind frameKind
	id   uint64
	body []byte
}

// encodeFrame returns the frame of kind for call id around body, ready to
// be written in one piece.
func encodeFrame(kind frameKind, id uint64, body []byte) []byte {
	b := make([]byte, headerBytes, headerBytes+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	b[4] = byte(kind)
	binary.BigEndian.PutUint64(b[5:], id)
	return append(b, body...)
}

// errFrameTooLarge is a frame whose length is over the connection's bound.
// The connection is closed: the peer does not follow the protocol, which
// never sends such a frame.
type errFrameTooLarge struct{ length, limit int }

func (e errFrameTooLarge) Error() string {
	return fmt.Sprintf("direct channel: frame of %d bytes over the %d-byte bound", e.length, e.limit)
}

// readFrame reads the next frame from r, refusing a body longer than
// limit (the message size limit, which bounds every message of the
// protocol).
func readFrame(r *bufio.Reader, limit int) (frame, error) {
	var h [headerBytes]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	n := int(binary.BigEndian.Uint32(h[:4]))
	f := frame{kind: frameKind(h[4]), id: binary.BigEndian.Uint64(h[5:])}
	if n > limit {
		return f, errFrameTooLarge{length: n, limit: limit}
	}
	f.body = make([]byte, n)
	if _, err := io.ReadFull(r, f.body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return f, nil
}
