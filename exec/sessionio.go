package exec

import (
	"io"

	"code-sandbox-mcp/exec/internal/sandbox"
)

// sessionIO are the standard streams of a session's driver: requests go
// in through in (inW is the server's end), cells' output comes out of out
// and errs.
type sessionIO struct {
	in   *io.PipeReader
	inW  *io.PipeWriter
	out  *cellStream
	errs *cellStream
}

func newSessionIO(outputBytes int64) *sessionIO {
	r, w := io.Pipe()
	return &sessionIO{in: r, inW: w, out: newCellStream(int(outputBytes), true), errs: newCellStream(int(outputBytes), false)}
}

// streams are the driver's streams as its sandbox takes them.
func (sio *sessionIO) streams() *sandbox.SessionStreams {
	return &sandbox.SessionStreams{Stdin: sio.in, Stdout: sio.out, Stderr: sio.errs, EndInput: sio.inW}
}
