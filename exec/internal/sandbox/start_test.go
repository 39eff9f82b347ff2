package sandbox

import (
	"io"
	"testing"
	"testing/synctest"
)

func TestStartLine(t *testing.T) {
	// In a synctest bubble, synctest.Wait returns once every goroutine of
	// the bubble is durably blocked: a read still pending then is blocked
	// on the line's channel, not merely slow, so no sleep is needed to
	// show that it waits.
	synctest.Test(t, func(t *testing.T) {
		read := func(l *startLine) chan []byte {
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(l)
				got <- b
			}()
			return got
		}

		sent := newStartLine("")
		got := read(sent)
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("read %q before send; want it to block", b)
		default:
		}
		sent.send()
		sent.close() // after send: changes nothing
		if b := <-got; string(b) != "\n" {
			t.Errorf("after send: read %q; want one newline, then EOF", b)
		}

		closed := newStartLine("")
		got = read(closed)
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("read %q before close; want it to block", b)
		default:
		}
		closed.close()
		closed.send() // after close: changes nothing
		if b := <-got; len(b) != 0 {
			t.Errorf("after close: read %q; want EOF and nothing else", b)
		}

		// A warm driver's preamble comes at once; the line waits.
		warm := newStartLine("csm-warm numpy\n")
		buf := make([]byte, 64)
		n, err := warm.Read(buf)
		if err != nil || string(buf[:n]) != "csm-warm numpy\n" {
			t.Fatalf("first read: %q, %v; want the preamble", buf[:n], err)
		}
		got = read(warm)
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("read %q after the preamble, before send; want it to block", b)
		default:
		}
		warm.send()
		if b := <-got; string(b) != "\n" {
			t.Errorf("after the preamble and send: read %q; want one newline, then EOF", b)
		}
	})
}
