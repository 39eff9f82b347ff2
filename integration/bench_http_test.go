package integration

// The HTTP rows of the benchmark (issue 14): a paced Python hello through
// streamable HTTP, with token authentication, beside the same hello
// through stdio, both servers up at once and called in alternating
// blocks so that they share the machine's noise; then throughput at
// concurrency 8 from 8 HTTP clients, each with its own token and MCP
// session, beside 8 workers on the stdio server's one client.

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

const (
	// overStdio and overHTTP name the runtimes of the HTTP rows.
	overStdio = "ours, pool %d, stdio"
	overHTTP  = "ours, pool %d, HTTP"
	// httpClients is how many HTTP clients the throughput row drives.
	httpClients = 8
	// httpBlock is how many paced calls go to one server before the
	// other's turn.
	httpBlock = 10
)

// httpRows measures the HTTP rows: n paced Python hellos on each
// transport, then throughput at concurrency 8 on each.
func httpRows(b *testing.B, bin string, pool, n int, rep *benchReport) {
	stdio := startBench(b, bin, "concurrency = 16\n")
	web := startBenchHTTP(b, bin, "concurrency = 16\n", httpClients)
	// Both exit before either's leftovers are checked: the check covers
	// the namespace, where the other's ready sandboxes would be.
	defer func() {
		web.exit(b)
		stdio.close(b)
		assertNoLeftovers(b, web.stateDir)
		if strings.Contains(web.stderr.String(), "panic") {
			b.Errorf("HTTP server stderr has a panic:\n%s", web.stderr)
		}
	}()
	p := benchPrograms[0]
	// Both servers' pools count: the namespace is quiet when it holds
	// both, full.
	quiet := 4 * pool
	stdio.waitQuiet(b, quiet)
	stdio.call(b, p) // warm the page cache and the clients
	web.call(b, p)
	var latStdio, latHTTP []time.Duration
	for len(latStdio) < n {
		for _, side := range []struct {
			s   *benchServer
			lat *[]time.Duration
		}{{stdio, &latStdio}, {web, &latHTTP}} {
			for range min(httpBlock, n-len(*side.lat)) {
				stdio.waitQuiet(b, quiet)
				start := time.Now()
				if _, err := side.s.callErr(p); err != nil {
					b.Fatalf("%s: %v\nstderr tail:\n%s", p.name, err, tail(side.s.stderr.String(), 2000))
				}
				*side.lat = append(*side.lat, time.Since(start))
			}
		}
	}
	for _, r := range []latencyRow{
		summarize(fmt.Sprintf(overStdio, pool), p.name, latStdio),
		summarize(fmt.Sprintf(overHTTP, pool), p.name, latHTTP),
	} {
		fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.1f ms\n", r.Runtime, r.Program, r.P50Ms)
		rep.Latency = append(rep.Latency, r)
	}

	stdio.waitQuiet(b, quiet)
	row := stdio.throughput(b, p, 8, 8*time.Second)
	row.Program = p.name + ", stdio, 1 client"
	rep.Throughput = append(rep.Throughput, row)
	stdio.waitQuiet(b, quiet)
	row = web.throughput(b, p, 8, 8*time.Second)
	row.Program = fmt.Sprintf("%s, HTTP, %d clients", p.name, httpClients)
	rep.Throughput = append(rep.Throughput, row)
}

// judgeHTTP adds the HTTP targets.
func (r *benchReport) judgeHTTP(add func(name string, known bool, got string, met bool)) {
	py := benchPrograms[0].name
	stdio, web := r.row(fmt.Sprintf(overStdio, r.Pool), py), r.row(fmt.Sprintf(overHTTP, r.Pool), py)
	if stdio == nil || web == nil {
		return
	}
	d := web.P50Ms - stdio.P50Ms
	add("python hello p50 over HTTP within 2 ms of stdio", true,
		fmt.Sprintf("%.1f ms vs %.1f ms: %+.1f ms (%.2fx)", web.P50Ms, stdio.P50Ms, d, web.P50Ms/stdio.P50Ms), d <= 2)
}

// take returns a client of s for one call, and the function that gives
// it back: s.c over stdio, a free one of s.clients over HTTP.
func (s *benchServer) take() (*client.Client, func()) {
	if s.free == nil {
		return s.c, func() {}
	}
	c := <-s.free
	return c, func() { s.free <- c }
}

// closeClients closes the HTTP clients of s, if any.
func (s *benchServer) closeClients() {
	var wg sync.WaitGroup
	for _, c := range s.clients {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
}
