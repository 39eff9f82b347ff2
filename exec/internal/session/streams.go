package session

import (
	"io"

	"code-sandbox-mcp/exec/internal/sandbox"
)

// Streams are the standard streams of a session's driver: requests go
// in through in (inW is the server's end), cells' output comes out of out
// and errs.
type Streams struct {
	in   *io.PipeReader
	inW  *io.PipeWriter
	out  *cellStream
	errs *cellStream
}

// NewStreams makes the streams of a driver whose cells' output is kept
// up to outputBytes a stream.
func NewStreams(outputBytes int64) *Streams {
	r, w := io.Pipe()
	return &Streams{in: r, inW: w, out: newCellStream(int(outputBytes), true), errs: newCellStream(int(outputBytes), false)}
}

// Sandbox is the driver's streams as its sandbox takes them.
func (sio *Streams) Sandbox() *sandbox.SessionStreams {
	return &sandbox.SessionStreams{Stdin: sio.in, Stdout: sio.out, Stderr: sio.errs, EndInput: sio.inW}
}
