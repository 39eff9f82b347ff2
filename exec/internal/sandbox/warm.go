package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"

	"code-sandbox-mcp/config"
)

// A warm ready sandbox waits for its program with the interpreter already
// started, in a driver of ours that runs as the program's own process
// under every layer of the hardening: for Python the start-up hook
// (pyhooks/sitecustomize.py), for Node.js a module given to --require
// (drivers/warm.js). Every sandbox of a warm language runs the driver; it
// does nothing unless it is the sandbox's program process (the init's
// child, and when it starts the one process of the sandbox besides the
// init), its standard input is a pipe and the program is not there yet.
// A process the program starts is never alone with the init: the
// program's process lives as long as anything in the sandbox does (the
// init exits with it, and the kernel then kills the rest), so it never
// waits, nor reads a byte of its input. On that pipe the
// server writes, at once, one line that names the modules to import
// first, and once the program is in place an empty one (see startLine). The driver writes warmMarker on
// both streams once it is ready; what comes before is not the program's.
// Then the interpreter runs the program as it would have without us.

// warmMarker is what the warm drivers write on standard output and
// standard error once they wait, warm, for the program.
const warmMarker = "\x00code-sandbox-mcp warm\x00\n"

// warmStartTimeout bounds a warm sandbox's start: the interpreter's and
// its preloads' (numpy and pandas take about 300 ms of a CPU, more from a
// cold page cache or on a busy host).
const warmStartTimeout = time.Minute

// warmPreludeMax is how much of what a warm start writes before its
// marker is kept, for the log; the start fails if there is any.
const warmPreludeMax = 4 << 10

// WarmInterpreter returns the interpreter whose warm driver lang's
// sandboxes run, or "" if lang is not warm or has none.
func WarmInterpreter(lang config.Language) string {
	if !lang.Warm {
		return ""
	}
	// There is a driver for each interpreter Interpreter knows.
	return lang.Interpreter()
}

// warmLine is the line a warm sandbox reads first: the modules it imports
// before it waits.
func warmLine(preload []string) string {
	return strings.Join(append([]string{"csm-warm"}, preload...), " ") + "\n"
}

// warmStart is what a warm sandbox has of its start: the gates in front
// of its output captures, and whether it imported the language's preloads.
type warmStart struct {
	out, err  *warmGate
	preloaded bool
}

func newWarmStart(stdout, stderr io.Writer, preloaded bool) *warmStart {
	return &warmStart{out: newWarmGate(stdout), err: newWarmGate(stderr), preloaded: preloaded}
}

// WarmUp waits until s's driver is warm: its marker came through both
// streams with nothing before it. An error says why not; a *WarmFault is
// the warm start's own (the process ended: a preload failed, say; it
// wrote something first; it was not ready within warmStartTimeout), and
// any other error is not (ctx ended, containerd went away).
func (s *Sandbox) WarmUp(ctx context.Context) error {
	w := s.warm
	if w == nil {
		// Warm starts went off while it was made (see pool.warmFailed):
		// it waits in the stub, or was not started.
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, warmStartTimeout)
	defer cancel()
	// The kernel's word that the process ended counts only if it is
	// known: a watch that lost events, or none, closes done without it.
	kernel := s.exit.Done()
	for _, g := range []*warmGate{w.out, w.err} {
	wait:
		for {
			select {
			case <-g.ready:
				break wait
			case <-kernel:
				if code, ok := s.exit.Code(); ok {
					return s.warmEnded(w, code)
				}
				kernel = nil
			case st := <-s.exited:
				code, _, err := st.Result()
				if err != nil {
					// containerd went away, not the driver: no fault of
					// the warm start's.
					return fmt.Errorf("containerd's wait for the warm sandbox broke: %w", err)
				}
				return s.warmEnded(w, code)
			case <-ctx.Done():
				if ctx.Err() == context.DeadlineExceeded {
					return &WarmFault{fmt.Sprintf("its interpreter was not ready within %s%s", warmStartTimeout, w.said())}
				}
				return context.Cause(ctx)
			}
		}
	}
	if w.out.prelude() != "" || w.err.prelude() != "" {
		return &WarmFault{fmt.Sprintf("it wrote before the program ran, which the program's output would then lack or hold%s", w.said())}
	}
	return nil
}

// WarmFault is a warm start's failure that is its own: see warmUp.
type WarmFault struct{ why string }

func (f *WarmFault) Error() string { return f.why }

// warmEnded is warmUp's error once the driver's process ended first, with
// status code.
func (s *Sandbox) warmEnded(w *warmStart, code uint32) error {
	// The copiers reach the end of both streams once the process is gone.
	s.Drain()
	return &WarmFault{fmt.Sprintf("its interpreter exited, status %d, before it was ready%s", code, w.said())}
}

// said quotes what the start wrote, for an error, or is "".
func (w *warmStart) said() string {
	var parts []string
	for _, p := range []string{w.err.prelude(), w.out.prelude()} {
		if p = strings.TrimSpace(strings.Map(keepPrintable, p)); p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": it wrote " + fmt.Sprintf("%q", strings.Join(parts, " / "))
}

func keepPrintable(r rune) rune {
	if unicode.IsPrint(r) || r == '\n' {
		return r
	}
	return -1
}

// warmGate stands in front of one output stream of a warm sandbox: it
// holds what comes before warmMarker (the start's, not the program's),
// and passes on what follows. containerd's copier is its only writer.
type warmGate struct {
	w     io.Writer
	ready chan struct{} // closed once the marker came

	mu   sync.Mutex
	pre  []byte // before the marker, bounded
	lost int    // bytes left out of pre
	open bool
}

func newWarmGate(w io.Writer) *warmGate {
	return &warmGate{w: w, ready: make(chan struct{})}
}

func (g *warmGate) Write(p []byte) (int, error) {
	g.mu.Lock()
	if g.open {
		g.mu.Unlock()
		return g.w.Write(p)
	}
	g.pre = append(g.pre, p...)
	i := bytes.Index(g.pre, []byte(warmMarker))
	if i < 0 {
		// Keep the head for the log and the tail for the marker.
		if keep := warmPreludeMax + len(warmMarker); len(g.pre) > keep {
			tail := g.pre[len(g.pre)-len(warmMarker):]
			g.lost += len(g.pre) - keep
			g.pre = append(g.pre[:warmPreludeMax], tail...)
		}
		g.mu.Unlock()
		return len(p), nil
	}
	rest := bytes.Clone(g.pre[i+len(warmMarker):])
	g.pre = g.pre[:i]
	g.open = true
	close(g.ready)
	g.mu.Unlock()
	if len(rest) > 0 {
		if _, err := g.w.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// prelude returns what came before the marker (so far, if it has not).
func (g *warmGate) prelude() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := string(g.pre)
	if g.lost > 0 {
		s += fmt.Sprintf(" [%d more bytes]", g.lost)
	}
	return s
}

// WantsPreload reports whether code names one of the preloaded modules
// (its first component, as a whole word): such a program gets a sandbox
// that imported them, and any other one a sandbox that did not, whose
// exit is quicker. It decides speed only: both kinds run any program the
// same.
func WantsPreload(code string, preload []string) bool {
	for _, m := range preload {
		name := strings.TrimPrefix(m, "node:")
		if i := strings.IndexAny(name, "./"); i > 0 && !strings.HasPrefix(name, "@") {
			name = name[:i]
		}
		if name != "" && containsWord(code, name) {
			return true
		}
	}
	return false
}

// containsWord reports whether word occurs in s with no letter, digit or
// '_' on either side.
func containsWord(s, word string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(word)
		if (j == 0 || !isWordByte(s[j-1])) && (end == len(s) || !isWordByte(s[end])) {
			return true
		}
		i = j + 1
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// WarmSaid quotes what a warm sandbox's start wrote before its marker,
// for an error, or is "".
func (s *Sandbox) WarmSaid() string {
	if s.warm == nil {
		return ""
	}
	return s.warm.said()
}
