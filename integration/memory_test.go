package integration

// What the server itself holds, for the tests of issue 23 (every buffer
// the server keeps for a client or a program bounded): its resident set
// from /proc, and its Go heap from its own /metrics.

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowGOGC is the environment entry that memory tests give the server:
// with the collector's target at 10% over the live heap instead of 100%,
// the heap a scrape reports is what the server keeps, give or take a
// tenth, not garbage waiting for a collection. A bound that a test puts
// on heapBytes then holds for the live heap too.
const lowGOGC = "GOGC=10"

// rssBytes is the resident set of the process pid (VmRSS).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("VmRSS of %d: %q: %v", pid, rest, err)
		}
		return kb << 10
	}
	t.Fatalf("no VmRSS in /proc/%d/status: %v", pid, sc.Err())
	return 0
}

// rss is the server's resident set.
func (s *httpServer) rss(t *testing.T) int64 {
	t.Helper()
	return rssBytes(t, s.cmd.Process.Pid)
}

// heapBytes is the server's Go heap in use (go_memstats_heap_alloc_bytes
// on /metrics beside /mcp, read with token; "" on a server without
// tokens). Start the server with lowGOGC for it to track the live heap.
func (s *httpServer) heapBytes(t *testing.T, token string) int64 {
	t.Helper()
	sc := getMetrics(t, s.base+"/metrics", token)
	if sc.status != 200 {
		t.Fatalf("GET /metrics: %d; want 200", sc.status)
	}
	return int64(sc.value(t, "go_memstats_heap_alloc_bytes"))
}

// mib is n bytes in MiB, for messages.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
