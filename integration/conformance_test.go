package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
)

// conformanceExpected is the file of the conformance suite's server
// scenarios that are expected to fail, each with its reason.
const conformanceExpected = "testdata/conformance-expected-failures.txt"

// conformanceMustPass are scenarios that failed for real once (issue 27)
// and may never be listed as expected to fail.
var conformanceMustPass = []string{"dns-rebinding-protection", "logging-set-level"}

// TestConformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in integration/node) against
// the server with --http on loopback, and compares the outcome of each of
// its server scenarios (--suite all: the active ones and the pending)
// with conformanceExpected: a failure not listed
// there fails the test, and so does a listed scenario that passes or
// that the suite no longer has, so that the list stays true. The
// scenarios listed need the suite's own fixture tools, prompts and
// resources, which this server does not have.
//
// The suite sends its requests to the URL it is given alone (its server
// scenarios are MCP clients of that URL), which is on loopback; and the
// suite and the server run in a network namespace of their own that has
// loopback alone, so that nothing the suite does can reach further.
func TestConformance(t *testing.T) {
	node, modules := nodeTools(t)
	expected := readConformanceExpected(t)

	// The suite is one client that opens a session per scenario, some 30
	// within a second or two: past [http] rate_burst (20) its initializes
	// would get 429, which is the fair share working (TestHTTPLimitsRate),
	// not a conformance failure. It runs no program: no ready sandboxes.
	cfg := "[http]\nrate_limit = 0\n[languages.python]\npool = 0\n[languages.javascript]\npool = 0\n"
	s := startHTTPWith(t, serverSpec{config: cfg}, httpOptions{netns: true})
	u, err := url.Parse(s.base + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if loopback, err := httpauth.LoopbackOnly(u.Host); err != nil || !loopback {
		t.Fatalf("the server's URL %s is not on loopback (%v): the suite must send nothing beyond it", u, err)
	}

	// The namespace has loopback and nothing else to send through.
	links, err := s.inNetns(testContext(t), "ip", "-o", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show in the server's namespace: %v\n%s", err, links)
	}
	if lines := strings.Split(strings.TrimSpace(string(links)), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "1: lo:") {
		t.Fatalf("the server's network namespace has links besides loopback:\n%s", links)
	}

	cli := filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := s.inNetns(ctx, node, cli, "server", "--suite", "all", "--url", u.String(), "--output-dir", out)
	cmd.Dir = out
	// No proxy nor npm setting from the test's environment: HOME is the
	// test's own directory.
	cmd.Env = []string{"PATH=" + filepath.Dir(node) + ":/usr/bin:/bin", "HOME=" + out, "NO_COLOR=1"}
	// Its own process group, all killed if the suite outlives the
	// deadline, so that nothing it started stays behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	start := time.Now()
	runErr := cmd.Run()
	// The suite exits 1 when any scenario fails, expected or not: the
	// outcomes are judged from its results below, not from its status.
	if ctx.Err() != nil {
		t.Fatalf("the conformance suite did not end within 3 minutes; its output:\n%s", output.String())
	}
	t.Logf("the conformance suite ran in %s (exit: %v)", time.Since(start).Round(time.Millisecond), runErr)

	outcomes := readConformanceResults(t, out)
	if len(outcomes) == 0 {
		t.Fatalf("the conformance suite wrote no results in %s; its output:\n%s", out, output.String())
	}
	// Every server scenario the suite has must have run: one that ended
	// the suite early, or wrote no results, is not a pass.
	list := s.inNetns(ctx, node, cli, "list", "--server")
	list.Env = cmd.Env
	listed, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list --server: %v\n%s", err, listed)
	}
	scenarios := conformanceListed.FindAllStringSubmatch(string(listed), -1)
	if len(scenarios) == 0 {
		t.Fatalf("conformance list --server listed no scenario:\n%s", listed)
	}
	for _, m := range scenarios {
		if _, ran := outcomes[m[1]]; !ran {
			t.Errorf("the suite has server scenario %s, but wrote no result for it", m[1])
		}
	}
	names := slices.Sorted(maps.Keys(outcomes))
	var table strings.Builder
	for _, n := range names {
		o := outcomes[n]
		verdict := "pass"
		if o.failed() {
			verdict = "FAIL"
			if _, ok := expected[n]; ok {
				verdict = "fail (expected)"
			}
		}
		fmt.Fprintf(&table, "  %-32s %-16s %d checks\n", n, verdict, len(o.checks))
	}
	t.Logf("conformance scenarios:\n%s", table.String())

	for _, n := range names {
		o := outcomes[n]
		_, listed := expected[n]
		switch {
		case o.failed() && !listed:
			t.Errorf("scenario %s fails, and %s does not expect it to:\n%s", n, conformanceExpected, o.failures())
		case !o.failed() && listed:
			t.Errorf("scenario %s passes, but %s expects it to fail: remove its line", n, conformanceExpected)
		}
	}
	for n := range expected {
		if _, ran := outcomes[n]; !ran {
			t.Errorf("%s lists scenario %s, which the suite did not run: remove its line", conformanceExpected, n)
		}
	}
	for _, n := range conformanceMustPass {
		if o, ran := outcomes[n]; !ran || o.failed() {
			t.Errorf("scenario %s must run and pass (ran: %v)", n, ran)
		}
	}
	if t.Failed() {
		t.Logf("the suite's output:\n%s", output.String())
	}
}

// readConformanceExpected reads conformanceExpected: a scenario and its
// reason a line, blank lines and lines starting with # aside. A line
// without a reason, or a scenario twice, or one that must pass, fails
// the test.
func readConformanceExpected(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(conformanceExpected)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	expected := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, reason, _ := strings.Cut(text, " ")
		reason = strings.TrimSpace(reason)
		switch {
		case reason == "":
			t.Errorf("%s:%d: scenario %s has no reason; write why it is expected to fail after its name", conformanceExpected, line, name)
		case expected[name] != "":
			t.Errorf("%s:%d: scenario %s is listed twice", conformanceExpected, line, name)
		case slices.Contains(conformanceMustPass, name):
			t.Errorf("%s:%d: scenario %s must pass; it may not be listed", conformanceExpected, line, name)
		}
		expected[name] = reason
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return expected
}

// inNetns returns the command that runs name in the network namespace of
// s, which startHTTPWith made with netns: the only place where s's
// address can be reached. nsenter joins the namespace and execs name, so
// that the process started is name's.
func (s *httpServer) inNetns(ctx context.Context, name string, args ...string) *osexec.Cmd {
	return osexec.CommandContext(ctx, "nsenter", append([]string{fmt.Sprintf("--net=/proc/%d/ns/net", s.cmd.Process.Pid), "--", name}, args...)...)
}

// conformanceCheck is one check of a scenario, as the suite writes it in
// its checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	ErrorMessage string `json:"errorMessage"`
}

// conformanceOutcome is what a scenario's checks came to.
type conformanceOutcome struct{ checks []conformanceCheck }

// failed is the suite's own rule: a scenario with a check that failed or
// warned has failed.
func (o conformanceOutcome) failed() bool {
	return slices.ContainsFunc(o.checks, func(c conformanceCheck) bool { return c.Status == "FAILURE" || c.Status == "WARNING" })
}

// failures lists the checks that failed or warned, with the suite's
// message, one a line.
func (o conformanceOutcome) failures() string {
	var b strings.Builder
	for _, c := range o.checks {
		if c.Status == "FAILURE" || c.Status == "WARNING" {
			fmt.Fprintf(&b, "    %s %s: %s\n", c.Status, c.ID, c.ErrorMessage)
		}
	}
	return b.String()
}

// conformanceResultDir is the name of the directory the suite writes a
// server scenario's checks.json in: server-SCENARIO-TIMESTAMP.
var conformanceResultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// conformanceListed matches a scenario in the output of the suite's list
// command: "  - NAME [VERSIONS]".
var conformanceListed = regexp.MustCompile(`(?m)^\s*- (\S+) \[`)

// readConformanceResults reads each scenario's checks from the suite's
// output directory.
func readConformanceResults(t *testing.T, dir string) map[string]conformanceOutcome {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]conformanceOutcome{}
	for _, e := range entries {
		m := conformanceResultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Fatalf("scenario %s: %v", m[1], err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("scenario %s's checks.json: %v", m[1], err)
		}
		if _, dup := outcomes[m[1]]; dup {
			t.Fatalf("scenario %s has two result directories in %s", m[1], dir)
		}
		outcomes[m[1]] = conformanceOutcome{checks: checks}
	}
	return outcomes
}
