package exec

import (
	"io"
	"testing"
	"time"
)

func TestStartLine(t *testing.T) {
	read := func(l *startLine) chan []byte {
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(l)
			got <- b
		}()
		return got
	}

	sent := newStartLine()
	got := read(sent)
	select {
	case b := <-got:
		t.Fatalf("read %q before send; want it to block", b)
	case <-time.After(50 * time.Millisecond):
	}
	sent.send()
	sent.close() // after send: changes nothing
	if b := <-got; string(b) != "\n" {
		t.Errorf("after send: read %q; want one newline, then EOF", b)
	}

	closed := newStartLine()
	got = read(closed)
	closed.close()
	closed.send() // after close: changes nothing
	if b := <-got; len(b) != 0 {
		t.Errorf("after close: read %q; want EOF and nothing else", b)
	}
}
