// Command profile prints the integration suite's profile as a Markdown
// table: each top-level test's wall time and the sandboxes it made, per
// run, from what scripts/integration keeps under INTEGRATION_PROFILE=DIR:
// DIR/RUN.json, the run's go test -v output through go tool test2json -t,
// and DIR/RUN.events, a line "UNIXNANO ID" for each container created on
// the run's shared daemon (integration/profile_test.go).
//
//	go run ./integration/profile DIR
//	go run ./integration/profile -durations DIR... > integration/testdata/durations
//
// With -durations it prints instead a line "TEST SECONDS" for each test
// that ran in a lane, its time in a 2.x lane where it ran in one: the
// times by which scripts/integration deals the tests to the 2.x lanes.
// Given several DIRs, of runs of one tree, a test's time is its mean over
// those it ran in: one run's times differ from the next's by up to half
// (the longest test, 59 s in one run, 85 s in the next). The runs of the
// phase after the lanes (NAME-alone) are left out.
//
// A test's sandboxes are the creations between its start and its end; the
// tests of one run go one after another, so none is counted twice. The
// fault tests' own daemons are not watched, so their sandboxes are not
// counted.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// event is the part of a test2json event the profile reads.
type event struct {
	Time    time.Time
	Action  string
	Test    string
	Elapsed float64
}

// row is one top-level test of one run.
type row struct {
	run, test, result string
	start, end        time.Time
	seconds           float64
	sandboxes         int
}

func main() {
	durations := flag.Bool("durations", false, "print each test's time in a 2.x lane, for integration/testdata/durations (the mean over several DIRs)")
	flag.Parse()
	if flag.NArg() == 0 || flag.NArg() > 1 && !*durations {
		fmt.Fprintln(os.Stderr, "usage: go run ./integration/profile DIR | -durations DIR... (each the INTEGRATION_PROFILE of a make integration run)")
		os.Exit(2)
	}
	var err error
	if *durations {
		err = printDurations(flag.Args())
	} else {
		err = run(flag.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	rows, runs, err := readDir(dir)
	if err != nil {
		return err
	}
	fmt.Println("| run | tests run | skipped | failed | sum of test times (s) | sandboxes |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, name := range runs {
		var ran, skipped, failed, boxes int
		var sum float64
		for _, r := range rows {
			if r.run != name {
				continue
			}
			switch r.result {
			case "skip":
				skipped++
				continue
			case "fail":
				failed++
			}
			ran++
			sum += r.seconds
			boxes += r.sandboxes
		}
		fmt.Printf("| %s | %d | %d | %d | %.0f | %d |\n", name, ran, skipped, failed, sum, boxes)
	}
	fmt.Println()
	fmt.Println("| test | run | result | s | sandboxes |")
	fmt.Println("|---|---|---|---:|---:|")
	for _, r := range rows {
		if r.result == "skip" {
			continue
		}
		fmt.Printf("| %s | %s | %s | %.1f | %d |\n", r.test, r.run, r.result, r.seconds, r.sandboxes)
	}
	return nil
}

// printDurations prints "TEST SECONDS" for each test that ran in the
// runs in dirs, sorted by name: its time in a 2.x lane, or in another
// where it ran in none, the mean over the dirs it ran in.
func printDurations(dirs []string) error {
	sum, n := map[string]float64{}, map[string]int{}
	for _, dir := range dirs {
		rows, _, err := readDir(dir)
		if err != nil {
			return err
		}
		best := map[string]row{}
		for _, r := range rows {
			// A run NAME-alone is scripts/integration's phase after the
			// lanes (case 27 alone on the host): its times are no lane's.
			if r.result == "skip" || strings.HasSuffix(r.run, "-alone") {
				continue
			}
			if b, ok := best[r.test]; !ok || !strings.HasPrefix(b.run, "2.x") && strings.HasPrefix(r.run, "2.x") {
				best[r.test] = r
			}
		}
		for name, r := range best {
			sum[name] += r.seconds
			n[name]++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sum)) {
		fmt.Printf("%s %.1f\n", name, sum[name]/float64(n[name]))
	}
	return nil
}

// readDir reads the runs of DIR: their top-level tests, longest first,
// each with the sandboxes it made, and the runs' names.
func readDir(dir string) ([]row, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no RUN.json in %s: run make integration with INTEGRATION_PROFILE=%s", dir, dir)
	}
	var rows []row
	var runs []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		r, err := readRun(name, f)
		if err != nil {
			return nil, nil, err
		}
		creates, err := readCreates(filepath.Join(dir, name+".events"))
		if err != nil {
			return nil, nil, err
		}
		for i := range r {
			for _, c := range creates {
				if !c.Before(r[i].start) && !c.After(r[i].end) {
					r[i].sandboxes++
				}
			}
		}
		runs = append(runs, name)
		rows = append(rows, r...)
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(b.seconds, a.seconds) })
	return rows, runs, nil
}

// readRun reads the top-level tests of run name from its test2json file.
func readRun(name, path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	started := map[string]time.Time{}
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "run":
			started[e.Test] = e.Time
		case "pass", "fail", "skip":
			rows = append(rows, row{run: name, test: e.Test, result: e.Action, start: started[e.Test], end: e.Time, seconds: e.Elapsed})
		}
	}
	return rows, sc.Err()
}

// readCreates reads the creation times of a .events file; a missing file
// is a run that made none it saw.
func readCreates(path string) ([]time.Time, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for line := range strings.Lines(string(b)) {
		ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		out = append(out, time.Unix(0, n))
	}
	return out, nil
}
