package logtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Run with -race: a writer and a reader at once.
func TestBufferWriterAndReaderAtOnce(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 100 {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}()
	for range 100 {
		_ = b.String()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != 100 {
		t.Errorf("%d lines; want 100", got)
	}
}
