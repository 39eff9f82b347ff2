package integration

// The HTTP soak of the benchmark (issue 23): one server over streamable
// HTTP with a token per client, and 8 clients, each with its own token and
// MCP session, each looping over a mix of what clients do: a Python hello;
// a run with input files that writes output files, one of which it reads
// back through its sandbox:// URI; a session (create_session, cells that
// keep state, close_session), Python and JavaScript in turn; a JavaScript
// hello; and, every few rounds, a call that is meant to fail (a run past
// its time limit, a files argument with too many entries or too many
// bytes, a URI of no run, a session that does not exist). It runs for a
// warm-up, then for BENCH_SOAK_HTTP_SECONDS (default 180), or until its
// count of calls is reached, and samples the server's RSS and Go heap
// throughout. The RSS at the start (the highest of the warm-up's second
// half), its peak after the warm-up and its end are reported; the peak
// and the end must be at most 10% over the start.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

const (
	// soakHTTPClients is how many clients the soak drives, each with a
	// token and an MCP session of its own.
	soakHTTPClients = 8
	// soakHTTPWarmup is how long the mix runs before the RSS that the
	// others are held to is taken: long enough for the pools to have
	// cycled, every kind of call to have run on every client, the file
	// store to hold as many runs as it keeps at a time (its retention,
	// soakHTTPRetention, is shorter), and the Go heap to have grown to its
	// working size.
	soakHTTPWarmup = 20 * time.Second
	// soakHTTPRetention is the soak server's file_retention: shorter than
	// the warm-up, so that the store is at its steady size (runs expire
	// as fast as they are kept) before the first sample counts. With the
	// default of 15 minutes it would still be filling at the end, by
	// design and within file_retention_bytes, and the RSS would grow with
	// it however flat the rest is.
	soakHTTPRetention = 15 * time.Second
	// soakHTTPEvery is how often the RSS, the heap and the goroutines are
	// sampled for the series; the peak RSS is polled every
	// soakHTTPPeakEvery.
	soakHTTPEvery     = 5 * time.Second
	soakHTTPPeakEvery = 250 * time.Millisecond
	// soakHTTPCallsPerSecond bounds the soak's count of calls: at most
	// this many a second of its whole length, far above what a small
	// machine does, so that time ends it there and a fast machine ends
	// by count.
	soakHTTPCallsPerSecond = 100
	// soakHTTPFailEvery: every this many rounds of the mix, a client
	// adds one call meant to fail, of the next kind of soakFailures.
	soakHTTPFailEvery = 4
	// soakHTTPFilesIn is the soak server's files_in_bytes, lowered from
	// the default (10 MiB) so that the argument over it is a 256 KiB
	// request: the server parses an argument several times over before
	// it refuses it, and a 10 MiB one (or the 1 MiB of a first version of
	// this soak) swings the heap by ten times its size for as long as
	// the call lasts, which says nothing of what the server keeps.
	soakHTTPFilesIn = 256 << 10
	// soakHTTPBlob is the size of the binary input file, which the run
	// writes back reversed and the client reads through its URI.
	soakHTTPBlob = 64 << 10
)

// soakHTTPConfig is the soak server's configuration, beyond the uids:
// limits that 8 clients' mix needs so that none of its calls is refused
// by accident. Each client has at most one call in flight (within
// per_client_concurrency, half of concurrency) and one session open
// (within per_client_sessions, all 8 within max_sessions); a client's
// round is about a dozen tool calls in a few seconds, over rate_limit's
// default of 120 a minute, so the rate is raised, not turned off.
var soakHTTPConfig = fmt.Sprintf(`concurrency = 16
file_retention = %q

[limits]
files_in_bytes = %d

[http]
rate_limit = 6000
rate_burst = 100
per_client_sessions = 2

[sessions]
max_sessions = 16
`, soakHTTPRetention, soakHTTPFilesIn)

// soakHTTPSample is one sample of the server, at some time from the
// first call.
type soakHTTPSample struct {
	AtS        float64 `json:"at_s"`
	RSSMiB     float64 `json:"rss_mib"`
	AnonMiB    float64 `json:"rss_anon_mib"` // of RSSMiB, anonymous memory: the Go heap, stacks, the runtime's
	FileMiB    float64 `json:"rss_file_mib"` // of RSSMiB, pages of files: the binary's code and data
	HeapMiB    float64 `json:"heap_alloc_mib"`
	Goroutines int     `json:"goroutines"`
	Warmup     bool    `json:"warmup,omitempty"`
}

// soakHTTPKind counts one kind of call of the soak.
type soakHTTPKind struct {
	Kind  string `json:"kind"`
	Calls int    `json:"calls"`
	// FailedAsMeant counts the calls meant to fail that failed as they
	// should (the refusal or the failure they exist for).
	FailedAsMeant int     `json:"failed_as_meant,omitempty"`
	Unexpected    int     `json:"unexpected_errors"`
	P50Ms         float64 `json:"p50_ms"`
	lat           []time.Duration
}

// soakHTTPRow is the HTTP soak's report.
type soakHTTPRow struct {
	Clients  int     `json:"clients"`
	WarmupS  float64 `json:"warmup_s"`
	Seconds  float64 `json:"seconds"` // after the warm-up
	EndedBy  string  `json:"ended_by"`
	Calls    int     `json:"calls"`
	MaxCalls int     `json:"max_calls"`
	// Deliberate are the calls meant to fail that did; Unexpected every
	// other error, and every call meant to fail that did not fail as
	// meant.
	Deliberate      int            `json:"deliberate_errors"`
	Unexpected      int            `json:"unexpected_errors"`
	FirstUnexpected []string       `json:"first_unexpected,omitempty"`
	Kinds           []soakHTTPKind `json:"kinds"`
	// StartRSSMiB, the start, is the highest RSS of the warm-up's second
	// half; WarmupEndRSSMiB the RSS at its end. The Go heap in use
	// swings with the collector (GOGC=100) and with the calls in flight
	// (a 256 KiB argument is parsed several times over), and the RSS
	// follows it within seconds: a single sample may be anywhere in
	// that swing, so the highest after the warm-up is held to the
	// highest in it.
	StartRSSMiB     float64          `json:"start_rss_mib"`
	WarmupEndRSSMiB float64          `json:"warmup_end_rss_mib"`
	PeakRSSMiB      float64          `json:"peak_rss_mib"`
	EndRSSMiB       float64          `json:"end_rss_mib"`
	StartHeapMiB    float64          `json:"start_heap_alloc_mib"`
	PeakHeapMiB     float64          `json:"peak_heap_alloc_mib"`
	EndHeapMiB      float64          `json:"end_heap_alloc_mib"`
	Samples         []soakHTTPSample `json:"samples"`
	AfterExit       []string         `json:"after_exit,omitempty"`
}

// flat reports whether the server's RSS held: after the warm-up, its
// peak and its end at most 10% over its start.
func (r *soakHTTPRow) flat() bool {
	return r.StartRSSMiB > 0 && r.PeakRSSMiB <= 1.1*r.StartRSSMiB && r.EndRSSMiB <= 1.1*r.StartRSSMiB
}

// rssLine sums up the RSS and the heap in a line.
func (r *soakHTTPRow) rssLine() string {
	return fmt.Sprintf("RSS %.1f MiB at start (the highest of the %.0f s warm-up's second half; %.1f MiB at its end), %.1f MiB peak after it (%+.1f%%), %.1f MiB at the end (%+.1f%%); Go heap in use %.1f MiB at the warm-up's end, %.1f peak, %.1f at the end",
		r.StartRSSMiB, r.WarmupS, r.WarmupEndRSSMiB, r.PeakRSSMiB, pct(r.PeakRSSMiB, r.StartRSSMiB), r.EndRSSMiB, pct(r.EndRSSMiB, r.StartRSSMiB),
		r.StartHeapMiB, r.PeakHeapMiB, r.EndHeapMiB)
}

// pct is how much larger than base v is, in percent.
func pct(v, base float64) float64 {
	if base == 0 {
		return 0
	}
	return round(100 * (v/base - 1))
}

// table renders the soak for the benchmark's table.
func (r *soakHTTPRow) table() string {
	var w strings.Builder
	fmt.Fprintf(&w, "\nHTTP soak: %d clients (a token and an MCP session each) on one server, %.0f s after a %.0f s warm-up, ended by %s: %d calls (at most %d), %d failed as meant, %d unexpected errors; %s.\n\n",
		r.Clients, r.Seconds, r.WarmupS, r.EndedBy, r.Calls, r.MaxCalls, r.Deliberate, r.Unexpected, r.rssLine())
	fmt.Fprintf(&w, "| kind of call | calls | failed as meant | unexpected errors | p50 ms |\n|---|--:|--:|--:|--:|\n")
	for _, k := range r.Kinds {
		fmt.Fprintf(&w, "| %s | %d | %d | %d | %.1f |\n", k.Kind, k.Calls, k.FailedAsMeant, k.Unexpected, k.P50Ms)
	}
	var series []string
	for _, s := range r.Samples {
		mark := ""
		if s.Warmup {
			mark = " (warm-up)"
		}
		series = append(series, fmt.Sprintf("%.0f s: %.1f (%.1f)/%.1f/%d%s", s.AtS, s.RSSMiB, s.AnonMiB, s.HeapMiB, s.Goroutines, mark))
	}
	fmt.Fprintf(&w, "\nevery %s, RSS MiB (of it anonymous)/Go heap in use MiB/goroutines: %s.\n", soakHTTPEvery, strings.Join(series, ", "))
	for _, e := range r.FirstUnexpected {
		fmt.Fprintf(&w, "- unexpected: %s\n", e)
	}
	for _, e := range r.AfterExit {
		fmt.Fprintf(&w, "- after exit: %s\n", e)
	}
	return w.String()
}

// judgeSoakHTTP adds the HTTP soak's targets.
func (r *benchReport) judgeSoakHTTP(add func(name string, known bool, got string, met bool)) {
	s := r.SoakHTTP
	if s == nil {
		return
	}
	add("HTTP soak RSS flat within 10% (end and peak vs start)", s.StartRSSMiB > 0, s.rssLine(), s.flat())
	add("HTTP soak: no unexpected error, nothing left after exit", true,
		fmt.Sprintf("%d unexpected errors in %d calls (%d failed as meant), %d things wrong at or after exit", s.Unexpected, s.Calls, s.Deliberate, len(s.AfterExit)),
		s.Unexpected == 0 && len(s.AfterExit) == 0)
}

// soakHTTPSeconds reads BENCH_SOAK_HTTP_SECONDS: how long the HTTP soak
// runs after its warm-up.
func soakHTTPSeconds(b *testing.B) time.Duration {
	b.Helper()
	v := os.Getenv("BENCH_SOAK_HTTP_SECONDS")
	if v == "" {
		return 180 * time.Second
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 || n > 3600 {
		b.Fatalf("BENCH_SOAK_HTTP_SECONDS=%q: want a whole number of seconds from 10 to 3600", v)
	}
	return time.Duration(n) * time.Second
}

// soakHTTP runs the HTTP soak on a server of its own for d after the
// warm-up, then closes the server and records what its exit left wrong,
// which fails the benchmark as close's checks do; the calls' errors are
// only counted.
func soakHTTP(b *testing.B, bin string, pool int, d time.Duration) *soakHTTPRow {
	b.Helper()
	s := startBenchHTTP(b, bin, soakHTTPConfig, soakHTTPClients)
	s.waitQuiet(b, 2*pool)
	r := &soakHTTPRow{Clients: soakHTTPClients, WarmupS: soakHTTPWarmup.Seconds(), EndedBy: "time",
		MaxCalls: soakHTTPCallsPerSecond * int((soakHTTPWarmup + d).Seconds())}
	st := &soakHTTPStats{kinds: map[string]*soakHTTPKind{}}
	var issued atomic.Int64
	start := time.Now()
	warmEnd, end := start.Add(soakHTTPWarmup), start.Add(soakHTTPWarmup+d)
	more := func() bool {
		if issued.Load() >= int64(r.MaxCalls) {
			st.endedByCount.Store(true)
			return false
		}
		return time.Now().Before(end)
	}

	sm := &soakSampler{s: s, st: st, r: r, start: start, stop: make(chan struct{}), sampled: make(chan struct{})}
	go sm.run(warmEnd)

	var wg sync.WaitGroup
	for i, c := range s.clients {
		w := &soakHTTPClient{c: c, stats: st, issued: &issued, rng: rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))}
		wg.Go(func() { w.loop(i, more) })
	}
	wg.Wait()
	close(sm.stop)
	<-sm.sampled
	r.Seconds = round(time.Since(warmEnd).Seconds())
	if st.endedByCount.Load() {
		r.EndedBy = "count"
	}

	r.summarize(st, sm)

	rec := &recorder{TB: b}
	s.close(rec)
	for _, e := range rec.errs {
		b.Error(e)
		line, _, _ := strings.Cut(e, "\n") // without the server's stderr
		r.AfterExit = append(r.AfterExit, line)
	}
	fmt.Fprintf(os.Stderr, "bench: HTTP soak: %d calls, %d failed as meant, %d unexpected errors; %s\n", r.Calls, r.Deliberate, r.Unexpected, r.rssLine())
	return r
}

// soakSampler takes the soak's samples: the series every soakHTTPEvery,
// and the RSS polled every soakHTTPPeakEvery for its highest in the
// warm-up's second half (warmKiB, the start) and after the warm-up
// (peakKiB, the peak). run writes r.Samples and the KiB until sampled is
// closed, once stop is.
type soakSampler struct {
	s                *benchServer
	st               *soakHTTPStats
	r                *soakHTTPRow
	start            time.Time
	warmKiB, peakKiB int64
	stop, sampled    chan struct{}
}

// sample is the server's state now.
func (sm *soakSampler) sample() soakHTTPSample {
	s := sm.s
	heap, goroutines, err := s.goStats()
	if err != nil {
		sm.st.unexpected("metrics", fmt.Errorf("GET /metrics: %w", err))
	}
	at := time.Since(sm.start)
	anon, file := s.rssParts()
	return soakHTTPSample{AtS: round(at.Seconds()), RSSMiB: s.rss(), AnonMiB: round(float64(anon) / 1024), FileMiB: round(float64(file) / 1024),
		HeapMiB: round(heap / (1 << 20)), Goroutines: goroutines, Warmup: at < soakHTTPWarmup}
}

// run samples until stop is closed; the warm-up ends at warmEnd.
func (sm *soakSampler) run(warmEnd time.Time) {
	defer close(sm.sampled)
	r := sm.r
	series, poll := time.NewTicker(soakHTTPEvery), time.NewTicker(soakHTTPPeakEvery)
	defer series.Stop()
	defer poll.Stop()
	warm := time.NewTimer(time.Until(warmEnd))
	defer warm.Stop()
	for {
		select {
		case <-sm.stop:
			return
		case <-warm.C:
			// The sample at the warm-up's end.
			x := sm.sample()
			x.Warmup = false
			r.Samples = append(r.Samples, x)
			r.WarmupEndRSSMiB, r.StartHeapMiB = x.RSSMiB, x.HeapMiB
		case <-series.C:
			r.Samples = append(r.Samples, sm.sample())
		case <-poll.C:
			switch kib, at := sm.s.rssKiB(), time.Since(sm.start); {
			case at >= soakHTTPWarmup:
				sm.peakKiB = max(sm.peakKiB, kib)
			case at >= soakHTTPWarmup/2:
				sm.warmKiB = max(sm.warmKiB, kib)
			}
		}
	}
}

// summarize fills in r from the samples and the calls' stats, once the
// last call returned and before the server stops: the end's sample, the
// RSS and heap at start, peak and end, and the calls by kind.
func (r *soakHTTPRow) summarize(st *soakHTTPStats, sm *soakSampler) {
	// The end: after the last call returned, before the server stops.
	x := sm.sample()
	r.Samples = append(r.Samples, x)
	r.EndRSSMiB, r.EndHeapMiB = x.RSSMiB, x.HeapMiB
	r.StartRSSMiB = max(round(float64(sm.warmKiB)/1024), r.WarmupEndRSSMiB)
	r.PeakRSSMiB = max(round(float64(sm.peakKiB)/1024), r.WarmupEndRSSMiB, r.EndRSSMiB)
	for _, x := range r.Samples {
		if !x.Warmup {
			r.PeakHeapMiB = max(r.PeakHeapMiB, x.HeapMiB)
		}
	}
	if r.WarmupEndRSSMiB == 0 {
		st.unexpected("metrics", errors.New("the soak ended before its warm-up did: no start sample"))
	}

	for _, name := range soakHTTPKinds {
		if k, ok := st.kinds[name]; ok {
			k.P50Ms = ms(percentile(k.lat, 50))
			r.Kinds = append(r.Kinds, *k)
			r.Calls += k.Calls
			r.Deliberate += k.FailedAsMeant
			r.Unexpected += k.Unexpected
		}
	}
	if k, ok := st.kinds["metrics"]; ok {
		r.Unexpected += k.Unexpected
	}
	r.FirstUnexpected = st.first
}

// The kinds of call of the soak, in the order of its table.
const (
	kindHello        = "python hello"
	kindFiles        = "run with files in and out"
	kindRead         = "resources/read of an output file"
	kindCreate       = "create_session"
	kindCell         = "session cell"
	kindCloseSession = "close_session"
	kindJS           = "javascript hello"
	kindTimeout      = "meant to fail: past timeout_seconds"
	kindManyFiles    = "meant to fail: over max_files_in"
	kindBigFiles     = "meant to fail: over files_in_bytes"
	kindNoRun        = "meant to fail: read of no run's URI"
	kindNoSession    = "meant to fail: a session that does not exist"
)

var soakHTTPKinds = []string{kindHello, kindFiles, kindRead, kindCreate, kindCell, kindCloseSession, kindJS,
	kindTimeout, kindManyFiles, kindBigFiles, kindNoRun, kindNoSession}

// soakHTTPStats counts the soak's calls by kind. It is safe for
// concurrent use.
type soakHTTPStats struct {
	mu           sync.Mutex
	kinds        map[string]*soakHTTPKind
	first        []string // the first few unexpected errors
	endedByCount atomic.Bool
}

func (st *soakHTTPStats) kind(name string) *soakHTTPKind {
	k, ok := st.kinds[name]
	if !ok {
		k = &soakHTTPKind{Kind: name}
		st.kinds[name] = k
	}
	return k
}

// record counts a call of kind that took d: err is nil if it did what it
// is for (a call meant to fail failed as it should).
func (st *soakHTTPStats) record(kind string, meantToFail bool, d time.Duration, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	k := st.kind(kind)
	k.Calls++
	k.lat = append(k.lat, d)
	switch {
	case err != nil:
		k.Unexpected++
		if len(st.first) < 10 {
			st.first = append(st.first, fmt.Sprintf("%s: %s", kind, tail(err.Error(), 400)))
		}
	case meantToFail:
		k.FailedAsMeant++
	}
}

// unexpected counts an error of the soak's own, outside any call.
func (st *soakHTTPStats) unexpected(kind string, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.kind(kind).Unexpected++
	if len(st.first) < 10 {
		st.first = append(st.first, fmt.Sprintf("%s: %s", kind, tail(err.Error(), 400)))
	}
}

// soakHTTPClient is one client of the soak, with its own MCP session.
type soakHTTPClient struct {
	c      *client.Client
	stats  *soakHTTPStats
	issued *atomic.Int64
	rng    *rand.Rand
}

// soakFailures are the calls meant to fail, in the order a client makes
// them.
var soakFailures = []func(w *soakHTTPClient){
	(*soakHTTPClient).timeout, (*soakHTTPClient).manyFiles, (*soakHTTPClient).bigFiles,
	(*soakHTTPClient).noRun, (*soakHTTPClient).noSession,
}

// loop makes rounds of the mix for as long as more says, client i
// starting its calls meant to fail at its own place in soakFailures.
func (w *soakHTTPClient) loop(i int, more func() bool) {
	for round := 0; more(); round++ {
		w.hello(kindHello, "run_python_code", `print("hello")`)
		w.files()
		lang := []string{"python", "javascript"}[(round+i)%2]
		w.session(lang)
		w.hello(kindJS, "run_js_code", `console.log("hello")`)
		if (round+i)%soakHTTPFailEvery == soakHTTPFailEvery-1 {
			soakFailures[(round/soakHTTPFailEvery+i)%len(soakFailures)](w)
		}
	}
}

// soakResult is what the soak reads of a tool result.
type soakResult struct {
	text    string
	isError bool
	out     struct {
		Stdout    string `json:"stdout"`
		TimedOut  bool   `json:"timed_out"`
		SessionID string `json:"session_id"`
		Files     []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
			URI  string `json:"uri"`
		} `json:"files"`
	}
}

// call makes one tool call and counts it under kind, judged by check
// (nil: a result that is not an error). It returns the result, nil on a
// transport error.
func (w *soakHTTPClient) call(kind string, meantToFail bool, tool string, args map[string]any, check func(r *soakResult) error) *soakResult {
	w.issued.Add(1)
	if strings.HasPrefix(tool, "run_") {
		runs.Add(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	res, err := w.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	d := time.Since(t0)
	if err != nil {
		w.stats.record(kind, meantToFail, d, err)
		return nil
	}
	r := &soakResult{isError: res.IsError}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(mcp.TextContent); ok {
			r.text = tc.Text
		}
	}
	if data, err := json.Marshal(res.StructuredContent); err == nil {
		json.Unmarshal(data, &r.out)
	}
	if check == nil {
		check = func(r *soakResult) error {
			if r.isError {
				return fmt.Errorf("isError: %s", r.text)
			}
			return nil
		}
	}
	w.stats.record(kind, meantToFail, d, check(r))
	return r
}

// hello runs code, which prints hello.
func (w *soakHTTPClient) hello(kind, tool, code string) {
	w.call(kind, false, tool, map[string]any{"code": code}, func(r *soakResult) error {
		if r.isError || r.out.Stdout != "hello\n" {
			return fmt.Errorf("got %q (isError %v); want hello", tail(r.text, 300), r.isError)
		}
		return nil
	})
}

// filesCode sums a CSV and writes a binary input back reversed.
const filesCode = `import os
rows = open('in/data.csv').read().splitlines()[1:]
total = sum(int(r.split(',')[1]) for r in rows)
blob = open('in/blob.bin', 'rb').read()
os.makedirs('out', exist_ok=True)
open('out/total.txt', 'w').write(f'{total}\n')
open('out/reversed.bin', 'wb').write(blob[::-1])
print(total)
`

// files runs filesCode on a CSV and a binary file of random content,
// checks what it printed and the two output files it made, and reads
// out/reversed.bin back through its URI.
func (w *soakHTTPClient) files() {
	var csv strings.Builder
	csv.WriteString("item,amount\n")
	total := 0
	for i := range 50 {
		v := w.rng.IntN(1000)
		total += v
		fmt.Fprintf(&csv, "i%d,%d\n", i, v)
	}
	blob := make([]byte, soakHTTPBlob)
	for i := range blob {
		blob[i] = byte(w.rng.Uint32())
	}
	args := map[string]any{"code": filesCode, "files": []map[string]any{
		{"path": "in/data.csv", "content": csv.String()},
		{"path": "in/blob.bin", "content": base64.StdEncoding.EncodeToString(blob), "encoding": "base64"},
	}}
	var uri string
	w.call(kindFiles, false, "run_python_code", args, func(r *soakResult) error {
		if want := fmt.Sprintf("%d\n", total); r.isError || r.out.Stdout != want {
			return fmt.Errorf("got %q (isError %v); want %q", tail(r.text, 300), r.isError, want)
		}
		var paths []string
		for _, f := range r.out.Files {
			paths = append(paths, f.Path)
			if f.Path == "out/reversed.bin" && f.Size == soakHTTPBlob {
				uri = f.URI
			}
		}
		if slices.Sort(paths); !slices.Equal(paths, []string{"out/reversed.bin", "out/total.txt"}) || uri == "" {
			return fmt.Errorf("files %+v; want out/reversed.bin (%d bytes) and out/total.txt", r.out.Files, soakHTTPBlob)
		}
		return nil
	})
	if uri == "" {
		return
	}
	slices.Reverse(blob)
	w.read(kindRead, false, uri, func(res *mcp.ReadResourceResult, err error) error {
		if err != nil {
			return err
		}
		if len(res.Contents) != 1 {
			return fmt.Errorf("%d contents; want 1", len(res.Contents))
		}
		bc, ok := res.Contents[0].(mcp.BlobResourceContents)
		if !ok {
			return fmt.Errorf("contents %T; want a blob", res.Contents[0])
		}
		got, err := base64.StdEncoding.DecodeString(bc.Blob)
		if err != nil || string(got) != string(blob) {
			return fmt.Errorf("read back %d bytes (%v); want the input's %d reversed", len(got), err, len(blob))
		}
		return nil
	})
}

// read reads uri and counts it under kind, judged by check.
func (w *soakHTTPClient) read(kind string, meantToFail bool, uri string, check func(*mcp.ReadResourceResult, error) error) {
	w.issued.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	res, err := w.c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	w.stats.record(kind, meantToFail, time.Since(t0), check(res, err))
}

// soakCells are a session's cells by language: they count to 3 in
// session state, and the last prints it.
var soakCells = map[string]struct {
	tool  string
	cells []string
}{
	"python":     {"run_python_code", []string{"x = 0", "x += 1", "x += 1", "x += 1", "print(x)"}},
	"javascript": {"run_js_code", []string{"var x = 0", "x += 1; undefined", "x += 1; undefined", "x += 1; undefined", "console.log(x)"}},
}

// session creates a session of lang, runs its cells and closes it.
func (w *soakHTTPClient) session(lang string) {
	var id string
	w.call(kindCreate, false, "create_session", map[string]any{"language": lang}, func(r *soakResult) error {
		if r.isError || r.out.SessionID == "" {
			return fmt.Errorf("got %q (isError %v); want a session", tail(r.text, 300), r.isError)
		}
		id = r.out.SessionID
		return nil
	})
	if id == "" {
		return
	}
	sc := soakCells[lang]
	for i, cell := range sc.cells {
		last := i == len(sc.cells)-1
		w.call(kindCell, false, sc.tool, map[string]any{"code": cell, "session_id": id}, func(r *soakResult) error {
			if r.isError || last && r.out.Stdout != "3\n" {
				return fmt.Errorf("%s cell %q: got %q (isError %v)", lang, cell, tail(r.text, 300), r.isError)
			}
			return nil
		})
	}
	w.call(kindCloseSession, false, "close_session", map[string]any{"session_id": id}, nil)
}

// failedWith is a check of a call meant to fail: an error result whose
// text holds want.
func failedWith(want string) func(r *soakResult) error {
	return func(r *soakResult) error {
		if !r.isError || !strings.Contains(r.text, want) {
			return fmt.Errorf("got %q (isError %v); want an error result saying %q", tail(r.text, 300), r.isError, want)
		}
		return nil
	}
}

// timeout runs a program that sleeps past its time limit of 1 s.
func (w *soakHTTPClient) timeout() {
	w.call(kindTimeout, true, "run_python_code", map[string]any{"code": "import time\ntime.sleep(60)", "timeout_seconds": 1},
		func(r *soakResult) error {
			if !r.isError || !r.out.TimedOut {
				return fmt.Errorf("got %q (isError %v, timed_out %v); want a timeout", tail(r.text, 300), r.isError, r.out.TimedOut)
			}
			return nil
		})
}

// manyFiles passes one file more than max_files_in (100, the default).
func (w *soakHTTPClient) manyFiles() {
	files := make([]map[string]any, 101)
	for i := range files {
		files[i] = map[string]any{"path": fmt.Sprintf("f%d.txt", i), "content": "x"}
	}
	w.call(kindManyFiles, true, "run_python_code", map[string]any{"code": `print("never")`, "files": files}, failedWith("max_files_in"))
}

// bigFiles passes a file one byte over files_in_bytes.
func (w *soakHTTPClient) bigFiles() {
	files := []map[string]any{{"path": "big.txt", "content": strings.Repeat("x", soakHTTPFilesIn+1)}}
	w.call(kindBigFiles, true, "run_python_code", map[string]any{"code": `print("never")`, "files": files}, failedWith("files_in_bytes"))
}

// noRun reads a file of a run id no run had.
func (w *soakHTTPClient) noRun() {
	uri := fmt.Sprintf("sandbox://runs/%016x%016x/files/out/total.txt", w.rng.Uint64(), w.rng.Uint64())
	w.read(kindNoRun, true, uri, func(_ *mcp.ReadResourceResult, err error) error {
		if err == nil || !strings.Contains(err.Error(), "expired or never existed") {
			return fmt.Errorf("got error %v; want one saying the run expired or never existed", err)
		}
		return nil
	})
}

// noSession runs a cell in a session that was never created.
func (w *soakHTTPClient) noSession() {
	id := fmt.Sprintf("session-%016x%016x", w.rng.Uint64(), w.rng.Uint64())
	w.call(kindNoSession, true, "run_python_code", map[string]any{"code": "print(1)", "session_id": id}, failedWith("no open session"))
}

// goStats reads the server's Go heap in use and its goroutines from its
// /metrics, with the first client's token.
func (s *benchServer) goStats() (heap float64, goroutines int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.tokens[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, tail(string(body), 200))
	}
	found := 0
	for _, line := range strings.Split(string(body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch name {
		case "go_memstats_heap_alloc_bytes":
			heap, err = strconv.ParseFloat(v, 64)
			found++
		case "go_goroutines":
			var g float64
			g, err = strconv.ParseFloat(v, 64)
			goroutines = int(g)
			found++
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", line, err)
		}
	}
	if found != 2 {
		return 0, 0, errors.New("no go_memstats_heap_alloc_bytes or no go_goroutines")
	}
	return heap, goroutines, nil
}

// rssParts is the server's RssAnon and RssFile in KiB, 0 if they cannot
// be read.
func (s *benchServer) rssParts() (anon, file int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || name != "RssAnon" && name != "RssFile" {
			continue
		}
		kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if name == "RssAnon" {
			anon = kib
		} else {
			file = kib
		}
	}
	return anon, file
}
