package session

import (
	"bytes"
	"strings"
	"testing"
)

func TestCellStreamSplitsAtTheToken(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, chunk := range []int{1, 2, 7, 31, 32, 33, 1000} {
		c := newCellStream(1024, true)
		c.Write([]byte("left over "))
		ended := c.begin(tok, nil)
		stream := "hello\nno newline" + tok + `{"status":"ok","exit_code":0}` + "\nafter"
		for s := stream; len(s) > 0; {
			k := min(chunk, len(s))
			c.Write([]byte(s[:k]))
			s = s[k:]
		}
		select {
		case e := <-ended:
			if got, want := string(e.out), "left over hello\nno newline"; got != want {
				t.Errorf("chunk %d: output %q, want %q", chunk, got, want)
			}
			if got := string(e.status); got != `{"status":"ok","exit_code":0}` {
				t.Errorf("chunk %d: status %q", chunk, got)
			}
		default:
			t.Fatalf("chunk %d: no end", chunk)
		}
		// What follows belongs to the next cell.
		next := c.begin(strings.Repeat("9", 32), nil)
		c.Write([]byte("more" + strings.Repeat("9", 32) + "\n"))
		if e := <-next; string(e.out) != "aftermore" {
			t.Errorf("chunk %d: next cell's output %q", chunk, e.out)
		}
	}
}

func TestCellStreamStderrHasNoStatusAndFalseStartsAreKept(t *testing.T) {
	const tok = "abcabd"
	c := newCellStream(1024, false)
	ended := c.begin(tok, nil)
	c.Write([]byte("xabcab"))
	c.Write([]byte("cabcabd tail"))
	e := <-ended
	if string(e.out) != "xabcabc" || e.status != nil {
		t.Errorf("got %q status %q", e.out, e.status)
	}
	if out, _ := c.cur.Bytes(); string(out) != " tail" {
		t.Errorf("next cell holds %q", out)
	}
}

func TestCellStreamBoundsOutputAndStatus(t *testing.T) {
	const tok = "TOKENTOKENTOKENTOKENTOKENTOKEN00"
	c := newCellStream(100, true)
	ended := c.begin(tok, nil)
	c.Write(bytes.Repeat([]byte("x"), 10000))
	c.Write([]byte(tok))
	c.Write(bytes.Repeat([]byte("y"), 2*maxStatusLine))
	c.Write([]byte("\n"))
	e := <-ended
	if len(e.out) != 100 || e.dropped != 9900 {
		t.Errorf("kept %d dropped %d, want 100 and 9900", len(e.out), e.dropped)
	}
	if e.status != nil {
		t.Errorf("an overlong status line was taken: %d bytes", len(e.status))
	}
}

func TestCellStreamTapsTheCellsOutputOnly(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, chunk := range []int{1, 5, 31, 32, 33, 1000} {
		c := newCellStream(16, true)
		c.Write([]byte("between cells "))
		var tapped bytes.Buffer
		ended := c.begin(tok, func(p []byte) { tapped.Write(p) })
		// More than the 16 bytes kept: the tap sees every byte, not the
		// capture's head and tail; never the token, the status line or
		// what follows the cell.
		stream := "line one\nline two, longer than the capture\n" + tok[:5] + "not the token" + tok + `{"status":"ok","exit_code":0}` + "\nnext cell's"
		for s := stream; len(s) > 0; {
			k := min(chunk, len(s))
			c.Write([]byte(s[:k]))
			s = s[k:]
		}
		<-ended
		if got, want := tapped.String(), "line one\nline two, longer than the capture\n"+tok[:5]+"not the token"; got != want {
			t.Errorf("chunk %d: tapped %q; want %q", chunk, got, want)
		}
	}
}

func TestCellStreamUntapStopsTheTap(t *testing.T) {
	c := newCellStream(1024, false)
	var tapped bytes.Buffer
	c.begin("TOKEN", func(p []byte) { tapped.Write(p) })
	c.Write([]byte("told "))
	c.untap()
	c.Write([]byte("not told"))
	if got := tapped.String(); got != "told " {
		t.Errorf("tapped %q; want %q", got, "told ")
	}
}
