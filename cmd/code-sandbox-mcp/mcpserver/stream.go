package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A run's output reaches its client while it runs, as notifications/progress
// if the call carried a progressToken and as notifications/message (level
// info) if the client's log level lets info through. Both are bounded: a
// program can print far faster than a client or a proxy cares to read,
// and the result holds the output anyway. So a call's output is gathered
// and sent at most every streamEvery, at most streamBytes of it each
// time, and of what is over the last streamTail bytes of each stream,
// after the count of those dropped ("[... N bytes of stdout not streamed
// ...]"). A 50 MB flood then costs a few KiB of memory and a few
// notifications a second.
const (
	// streamEvery is the least time between two sends of a call's output.
	// The first output after a quiet spell goes at once, so a program
	// that prints a line now and then is seen as it prints.
	streamEvery = 250 * time.Millisecond
	// streamBytes bounds the output one send carries, all its
	// notifications together: about a screen of text (50 lines of 80
	// columns), four times a second, which is more than anyone reads
	// live. Escaped as JSON at worst (\u00XX for every byte) a
	// notification stays under 32 KiB, which no client or proxy chokes on.
	streamBytes = 4 << 10
	// streamParts bounds the notifications of output one send carries: a
	// program that alternates stdout and stderr byte by byte would
	// otherwise make one notification per byte. Past it, what comes on
	// the other stream is dropped until the next send.
	streamParts = 8
	// streamTail is how much of each stream's output past streamBytes (or
	// streamParts) a send keeps: its last bytes, after the count of those
	// dropped, since the end of a flood (a traceback, a summary) is what
	// a reader wants. A send carries at most streamBytes+2*streamTail
	// bytes of output, in at most streamParts+2 notifications.
	streamTail = 1 << 10
	// lineWait is how long a send waits for the end of a line it would
	// cut: interpreters often write a line's text and its newline apart
	// (Python's print does, unbuffered), microseconds apart on an idle
	// host, tens of milliseconds on a busy one. The end of the line
	// sends at once; a line that does not end (a progress bar's \r)
	// waits this long.
	lineWait = 50 * time.Millisecond
	// settleTimeout bounds the wait for the transport to take a
	// notification off the session's queue (see settle).
	settleTimeout = time.Second
)

// streams are the names of the two streams, as notifications give them;
// a stream's index in it is its index in outputStream's arrays.
var streams = [2]string{"stdout", "stderr"}

// A Secret is a value no notification may carry: a pass-through
// variable's, which the program's environment holds. Name stands for it,
// as "[redacted NAME]".
type Secret struct {
	Name, Value string
}

// notice is one notification of a call's output: text that came on
// stream, or said to be dropped from it. progress is the count of output
// bytes sent or said to be dropped so far, this one's included.
type notice struct {
	stream   string
	text     string
	progress int64
}

// outputStream is the sink of one call's output (exec.Request.Output):
// it redacts, bounds and paces the output, and hands each notice to send,
// in order, from one goroutine at a time. Close sends what is left, and
// nothing is sent after it returns.
type outputStream struct {
	send func(notice)
	red  *redactor // nil: nothing to redact

	mu      sync.Mutex
	held    [2][]byte // per stream: a tail that may begin a secret
	parts   []part    // gathered since the last send, in order
	kept    int       // bytes in parts
	tail    [2][]byte // per stream: the last of what did not fit in parts
	dropped [2]int64  // per stream, since the last send: neither in parts nor tail
	timer   *time.Timer
	armed   bool      // timer will send
	last    time.Time // of the last send
	first   time.Time // when the output gathered for the next send began
	cut     bool      // the timer waits for the end of a line (see cutWait)
	closed  bool

	// sendMu makes the sends one at a time, in order; progress is
	// sendMu's.
	sendMu   sync.Mutex
	progress int64
	sentAt   time.Time // when the last notices were sent
	// graced is called by Close once it sent its last notices, if it
	// sent any or the last went out within writeGrace; nil: none.
	graced func()
}

// part is output gathered from one stream, redacted.
type part struct {
	stream int
	text   []byte
}

func newOutputStream(red *redactor, send func(notice)) *outputStream {
	return &outputStream{send: send, red: red}
}

// Output is exec.Request.Output: it takes a chunk of the program's output
// on stream ("stdout" or "stderr"). It never blocks on the client: the
// sending is done by a timer's goroutine or Close.
func (o *outputStream) Output(stream string, p []byte) {
	i := 0
	if stream == streams[1] {
		i = 1
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	text := p
	if o.red != nil {
		text, o.held[i] = o.red.redact(append(o.held[i], p...), false)
	}
	if o.kept == 0 && len(o.tail[0])+len(o.tail[1]) == 0 {
		o.first = time.Now()
	}
	o.gather(i, text)
	if o.cut && bytes.HasSuffix(text, []byte("\n")) {
		// The line the timer waits for ended: send now.
		o.cut = false
		o.timer.Reset(0)
	}
	if o.armed || o.kept == 0 && len(o.tail[i]) == 0 {
		return
	}
	o.armed = true
	wait := time.Until(o.last.Add(streamEvery))
	if o.timer == nil {
		o.timer = time.AfterFunc(wait, o.flush)
	} else {
		o.timer.Reset(wait)
	}
}

// gather keeps what text fits in this send, up to streamBytes in all,
// and of what does not the last streamTail bytes of each stream: the
// end of a flood, a traceback, is what a reader wants. The rest is
// counted as dropped. o.mu is held.
func (o *outputStream) gather(i int, text []byte) {
	n := 0
	if len(o.tail[i]) == 0 && o.dropped[i] == 0 { // once over, the rest follows in the tail
		n = min(len(text), streamBytes-o.kept)
		switch {
		case n == 0:
		case len(o.parts) > 0 && o.parts[len(o.parts)-1].stream == i:
			last := &o.parts[len(o.parts)-1]
			last.text = append(last.text, text[:n]...)
		case len(o.parts) < streamParts:
			o.parts = append(o.parts, part{stream: i, text: append([]byte(nil), text[:n]...)})
		default:
			n = 0
		}
		o.kept += n
	}
	over := text[n:]
	if len(over) == 0 {
		return
	}
	t := o.tail[i]
	if cut := len(t) + len(over) - streamTail; cut > 0 {
		o.dropped[i] += int64(cut)
		if cut >= len(t) {
			t, over = t[:0], over[cut-len(t):]
		} else {
			t = append(t[:0], t[cut:]...)
		}
	}
	o.tail[i] = append(t, over...)
}

// take returns what was gathered since the last send, and starts the
// next. o.mu is held.
func (o *outputStream) take() (parts []part, dropped [2]int64, tails [2][]byte) {
	parts, dropped, tails = o.parts, o.dropped, o.tail
	o.parts, o.kept, o.dropped, o.tail = nil, 0, [2]int64{}, [2][]byte{}
	o.armed, o.last = false, time.Now()
	return parts, dropped, tails
}

// flush sends what was gathered: the timer's function.
func (o *outputStream) flush() {
	o.sendMu.Lock()
	defer o.sendMu.Unlock()
	o.mu.Lock()
	if o.closed || o.kept == 0 && len(o.tail[0])+len(o.tail[1]) == 0 {
		// Closed, or a second firing (see Output's reset) found nothing.
		o.mu.Unlock()
		return
	}
	if wait := o.cutWait(); wait > 0 {
		o.cut = true
		o.timer.Reset(wait)
		o.mu.Unlock()
		return
	}
	o.cut = false
	parts, dropped, tails := o.take()
	o.mu.Unlock()
	o.sendAll(parts, dropped, tails)
}

// cutWait is how much longer the next send should wait for the end of
// the line it would cut, within lineWait of the output's start; 0: send
// now. o.mu is held.
func (o *outputStream) cutWait() time.Duration {
	if len(o.parts) == 0 || len(o.tail[0])+len(o.tail[1]) > 0 {
		return 0
	}
	last := o.parts[len(o.parts)-1].text
	if last[len(last)-1] == '\n' {
		return 0
	}
	return time.Until(o.first.Add(lineWait))
}

// Close sends what is left, the held tails included, and stops the
// stream: call it once the run has returned, before its result.
func (o *outputStream) Close() {
	o.sendMu.Lock()
	defer o.sendMu.Unlock()
	o.mu.Lock()
	o.closed = true
	if o.timer != nil {
		o.timer.Stop()
	}
	for i, h := range o.held {
		if len(h) > 0 {
			text, _ := o.red.redact(h, true)
			o.gather(i, text)
			o.held[i] = nil
		}
	}
	parts, dropped, tails := o.take()
	o.mu.Unlock()
	// The grace is for notifications the transport may not have written
	// yet: none if the last went out a while ago (a hello's, sent as it
	// printed).
	if o.sendAll(parts, dropped, tails) > 0 || time.Since(o.sentAt) < writeGrace {
		if o.graced != nil {
			o.graced()
		}
	}
}

// sendAll sends parts, then for each stream that had more, how much was
// dropped and its tail; it returns how many notices it sent. o.sendMu is
// held.
func (o *outputStream) sendAll(parts []part, dropped [2]int64, tails [2][]byte) (sent int) {
	defer func() {
		if sent > 0 {
			o.sentAt = time.Now()
		}
	}()
	for _, p := range parts {
		o.progress += int64(len(p.text))
		o.send(notice{stream: streams[p.stream], text: strings.ToValidUTF8(string(p.text), "\uFFFD"), progress: o.progress})
		sent++
	}
	for i, n := range dropped {
		if n == 0 && len(tails[i]) == 0 {
			continue
		}
		o.progress += n + int64(len(tails[i]))
		text := fmt.Sprintf("[... %d bytes of %s not streamed ...]\n", n, streams[i])
		if n == 0 {
			text = ""
		}
		o.send(notice{stream: streams[i], text: text + strings.ToValidUTF8(string(tails[i]), "\uFFFD"), progress: o.progress})
		sent++
	}
	return sent
}

// redactor replaces each secret's value in a stream by its marker, across
// the chunks the stream comes in.
type redactor struct {
	values  [][]byte // longest first
	markers [][]byte
	first   [256]bool // the first bytes of values
}

// newRedactor is the redactor of secrets, or nil if none has a value.
func newRedactor(secrets []Secret) *redactor {
	secrets = slices.DeleteFunc(slices.Clone(secrets), func(s Secret) bool { return s.Value == "" })
	if len(secrets) == 0 {
		return nil
	}
	slices.SortStableFunc(secrets, func(a, b Secret) int { return len(b.Value) - len(a.Value) })
	r := &redactor{}
	for _, s := range secrets {
		r.values = append(r.values, []byte(s.Value))
		r.markers = append(r.markers, []byte("[redacted "+s.Name+"]"))
		r.first[s.Value[0]] = true
	}
	return r
}

// redact returns buf with each secret replaced by its marker, and, unless
// final, the tail of buf that may be the beginning of a secret, which is
// held back for the next chunk (rest is then not in out). A longer secret
// wins over one it begins with.
func (r *redactor) redact(buf []byte, final bool) (out, rest []byte) {
	out = make([]byte, 0, len(buf))
	for i := 0; i < len(buf); {
		if !r.first[buf[i]] {
			j := i + 1
			for j < len(buf) && !r.first[buf[j]] {
				j++
			}
			out = append(out, buf[i:j]...)
			i = j
			continue
		}
		matched := false
		for k, v := range r.values {
			if bytes.HasPrefix(buf[i:], v) {
				out = append(out, r.markers[k]...)
				i += len(v)
				matched = true
				break
			}
			if !final && len(buf)-i < len(v) && bytes.HasPrefix(v, buf[i:]) {
				return out, append([]byte(nil), buf[i:]...)
			}
		}
		if !matched {
			out = append(out, buf[i])
			i++
		}
	}
	return out, nil
}

// callStream is the output stream of the tool call req, which ctx
// carries: nil if the client asked for neither progress nor info logs,
// and then nothing is streamed.
func callStream(ctx context.Context, req mcp.CallToolRequest, red *redactor) *outputStream {
	s := server.ServerFromContext(ctx)
	if s == nil {
		return nil
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	logs := logsInfo(ctx)
	if token == nil && !logs {
		return nil
	}
	// stuck is set once the transport did not take a notification off
	// the session's queue within settleTimeout: the later ones are not
	// waited for. The sends are one at a time (see outputStream).
	stuck := false
	sent := func(err error) {
		// A notification the queue has no room for is lost (mcp-go does
		// not block); the result has the output anyway.
		if err == nil && !stuck {
			stuck = !settle(ctx)
		}
	}
	o := newOutputStream(red, func(n notice) {
		if ctx.Err() != nil {
			return // a cancelled call's client no longer listens for it
		}
		if token != nil {
			sent(s.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
				"progressToken": token, "progress": n.progress, "message": n.stream + ": " + n.text,
			}))
		}
		if logs {
			sent(s.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, n.stream, n.text)))
		}
	})
	o.graced = func() {
		if !stuck {
			time.Sleep(writeGrace)
		}
	}
	return o
}

// logsInfo reports whether the client of the request ctx carries lets log
// messages of level info through: the level it set with logging/setLevel
// (mcp-go's default is error), or on the 2026-07-28 protocol the one its
// request declares.
func logsInfo(ctx context.Context) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel != "" && mcp.LoggingLevelInfo.ShouldSendTo(info.LogLevel)
	}
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging)
	return ok && mcp.LoggingLevelInfo.ShouldSendTo(s.GetLogLevel())
}

// settle waits, up to settleTimeout, until the transport has taken the
// notifications queued for the session of the request ctx carries off its
// queue; it reports whether it did. mcp-go queues a notification for a
// goroutine of the transport's to write, and on streamable HTTP every
// stream open on the MCP session (each POST in flight; the server refuses
// GET streams) takes from the one queue: with calls in parallel, two
// notifications queued at once may go out on two streams, in either
// order. Sending each once the one before it
// was taken keeps them in order as long as the transport writes what it
// took at once. There is no event to wait for, so the queue's length is
// polled.
func settle(ctx context.Context) bool {
	session := server.ClientSessionFromContext(ctx)
	if session == nil {
		return true
	}
	q := session.NotificationChannel()
	deadline := time.Now().Add(settleTimeout)
	for len(q) > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// writeGrace is how long a call that sent notifications waits, once the
// last was taken off the queue (see settle), before its result: mcp-go
// writes the result itself while the goroutine that took the
// notification may not have written it yet, and a notification that
// comes after the result is dropped by the client. A guess at "at once",
// not a guarantee: there is nothing to wait for.
const writeGrace = time.Millisecond
