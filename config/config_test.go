package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

func TestDefaultsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("embedded defaults do not validate: %v", err)
	}
	if got, want := c.Names(), []string{"javascript", "python"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v; want %v", got, want)
	}
	py := c.Languages["python"]
	if py.Tool != "run_python_code" || c.Languages["javascript"].Tool != "run_js_code" {
		t.Errorf("tools = %q, %q; want run_python_code, run_js_code", py.Tool, c.Languages["javascript"].Tool)
	}
	l := c.limitsFor("python")
	if l.Memory != 512<<20 || l.Timeout != Duration(30*time.Second) || l.OutputBytes != 64<<10 || l.CodeBytes != 1<<20 ||
		l.PendingSignals != 1024 || l.MsgQueueSize != 256<<10 || l.LockedMemory != 64<<10 || l.Ptys != 4 {
		t.Errorf("python limits = %+v; want the documented defaults", l)
	}
	if got, want := c.UIDs(), (UIDRange{First: 2000000000, Last: 2000065535}); got != want {
		t.Errorf("UIDs() = %v; want %v", got, want)
	}
	if got, want := c.Sessions, (Sessions{MaxSessions: 4, IdleTimeout: Duration(10 * time.Minute), MaxLifetime: Duration(time.Hour)}); got != want {
		t.Errorf("Sessions = %+v; want %+v", got, want)
	}
	if py, js := mustLanguage(t, c, "python"), mustLanguage(t, c, "javascript"); py.SessionDriver != "python" || js.SessionDriver != "node" {
		t.Errorf("session drivers %q, %q; want python, node", py.SessionDriver, js.SessionDriver)
	}
}

// exampleKeys returns every key the example file sets, as dotted paths.
func exampleKeys(t *testing.T, path string) map[string]bool {
	t.Helper()
	var v map[string]any
	md, err := toml.DecodeFile(path, &v)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, k := range md.Keys() {
		keys[k.String()] = true
	}
	return keys
}

// TestExampleMatchesDefaults keeps sandbox.toml.example from drifting: it
// must decode to exactly the defaults, and set every key the defaults set.
func TestExampleMatchesDefaults(t *testing.T) {
	const example = "../sandbox.toml.example"
	got, err := Load(example)
	if err != nil {
		t.Fatalf("Load(%s): %v", example, err)
	}
	if got.File != example {
		t.Errorf("Load(%s).File = %q", example, got.File)
	}
	got.File = ""
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("%s decodes to\n%+v\nwant the embedded defaults\n%+v", example, got, want)
	}

	ex := exampleKeys(t, example)
	def := exampleKeys(t, "default.toml")
	var missing []string
	for k := range def {
		if !ex[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not document %v", example, missing)
	}
	// Every field of the schema must have its default in default.toml.
	for _, s := range []struct {
		table string
		v     any
	}{{"containerd", Containerd{}}, {"sandbox", Sandbox{}}, {"limits", LimitsTable{}}, {"sessions", Sessions{}}, {"languages.python", LanguageTable{}}} {
		rt := reflect.TypeOf(s.v)
		for i := 0; i < rt.NumField(); i++ {
			k := s.table + "." + rt.Field(i).Tag.Get("toml")
			if n := rt.Field(i).Name; n == "Limits" || n == "Network" {
				continue // per-language overrides: none by default
			}
			if !def[k] {
				t.Errorf("default.toml has no %s", k)
			}
		}
	}
	// The example documents the per-language limits table in a comment.
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"# [languages.python.limits]", "# [network]", "# [languages.python.network]", "# [network.secrets."} {
		if !strings.Contains(string(data), table) {
			t.Errorf("%s does not show a %s table", example, strings.TrimPrefix(table, "# "))
		}
	}
	// And the network's bounds, each with its default.
	n := (&Network{}).clone()
	for _, kv := range []string{
		fmt.Sprintf("# max_connections = %d\n", n.MaxConnections),
		fmt.Sprintf("# max_bytes = %q\n", n.MaxBytes),
		fmt.Sprintf("# idle_timeout = %q\n", strings.TrimSuffix(time.Duration(n.IdleTimeout).String(), "0s")),
		fmt.Sprintf("# max_connections_per_run = %d\n", n.MaxConnectionsPerRun),
		fmt.Sprintf("# connections_per_second = %d\n", n.ConnectionsPerSecond),
		fmt.Sprintf("# max_records = %d\n", n.MaxRecords),
	} {
		if !strings.Contains(string(data), kv) {
			t.Errorf("%s does not show the network's default %q", example, kv)
		}
	}
}

func TestOverrides(t *testing.T) {
	c, err := Parse(`
[limits]
memory = "1GiB"
timeout = "10s"

[languages.python]
image = "example.test/python:custom"

[languages.python.limits]
timeout = "60s"
cpus = 2.0

[languages.bash]
image = "localhost/code-sandbox-mcp/python:trixie"
command = ["bash"]
file = "main.sh"
`, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	py := c.Languages["python"]
	if py.Image != "example.test/python:custom" {
		t.Errorf("python image = %q; want the file's", py.Image)
	}
	if !reflect.DeepEqual(py.Command, []string{"python3"}) || py.Tool != "run_python_code" || len(py.Env) != 3 {
		t.Errorf("python lost its defaults when merged: %+v", py)
	}
	pl := mustLanguage(t, c, "python").Limits
	if pl.MemoryBytes != 1<<30 || pl.Timeout != 60*time.Second || pl.CPUs != 2 || pl.Pids != 128 {
		t.Errorf("python limits = %+v; want memory from [limits], timeout and cpus from its own table, pids default", pl)
	}
	jl := mustLanguage(t, c, "javascript").Limits
	if jl.MemoryBytes != 1<<30 || jl.Timeout != 10*time.Second || jl.CPUs != 1 {
		t.Errorf("javascript limits = %+v; want [limits] from the file", jl)
	}
	b := c.Languages["bash"]
	if b.Tool != "run_bash_code" || b.Description == "" {
		t.Errorf("bash = %+v; want tool run_bash_code and a description", b)
	}
	if got, want := c.Names(), []string{"bash", "javascript", "python"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v; want %v", got, want)
	}
	if Default().Languages["python"].Image == py.Image {
		t.Error("Parse changed the defaults")
	}
}

func TestLoadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sandbox.toml")
	if err := os.WriteFile(p, []byte("[limits]\nmemory = \"1GiB\"\n[languages.javascript]\ndisabled = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.Memory != 1<<30 {
		t.Errorf("memory = %s; want 1GiB", c.Limits.Memory)
	}
	if got := c.Names(); !reflect.DeepEqual(got, []string{"python"}) {
		t.Errorf("Names() = %v; want [python]", got)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Error("Load of a missing file: no error")
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		want       []string // all must appear in the error
	}{
		{"unknown top key", "[limit]\nmemory = \"1GiB\"", []string{"bad.toml", "unknown key limit (did you mean limits?)"}},
		{"unknown key", "[limits]\nmemroy = \"1GiB\"", []string{"bad.toml", "limits.memroy"}},
		{"unknown language key", "[languages.python]\nimg = \"x\"", []string{"languages.python.img"}},
		{"unknown language limit", "[languages.python.limits]\nram = \"1GiB\"", []string{"languages.python.limits.ram"}},
		{"bad size", "[limits]\nmemory = \"lots\"", []string{"bad.toml", "invalid size \"lots\""}},
		{"bad unit", "[limits]\nmemory = \"5 parsecs\"", []string{"invalid size"}},
		{"negative size", "[limits]\ntmp_size = -1", []string{"negative"}},
		{"zero size", "[limits]\noutput_bytes = \"0KiB\"", []string{"limits.output_bytes", "greater than 0"}},
		{"tiny memory", "[limits]\nmemory = \"1KiB\"", []string{"limits.memory", "too small"}},
		{"bad duration", "[limits]\ntimeout = \"soon\"", []string{"invalid duration \"soon\""}},
		{"integer duration", "[limits]\ntimeout = 30", []string{"invalid duration"}},
		{"timeout over max", "[limits]\ntimeout = \"200s\"", []string{"limits.timeout", "max_timeout"}},
		{"language timeout over max", "[languages.python.limits]\ntimeout = \"200s\"", []string{"languages.python.limits.timeout"}},
		{"task timeout under max", "[limits]\nmax_task_timeout = \"60s\"", []string{"limits.max_task_timeout", "less than max_timeout", "raise it"}},
		{"language task timeout under max", "[languages.python.limits]\nmax_timeout = \"2h\"", []string{"languages.python.limits.max_task_timeout", "less than max_timeout"}},
		{"task timeout over a day", "[limits]\nmax_task_timeout = \"25h\"", []string{"limits.max_task_timeout", "more than 24h"}},
		{"negative max tasks", "[tasks]\nmax_tasks = -1", []string{"tasks.max_tasks", "want 0 (no tasks) to 1024"}},
		{"too many tasks", "[tasks]\nmax_tasks = 5000", []string{"tasks.max_tasks", "to 1024"}},
		{"no retention", "[tasks]\nresult_retention = \"0s\"", []string{"tasks.result_retention", "want 1s to 24h"}},
		{"unknown task key", "[tasks]\nmax = 3", []string{"tasks.max"}},
		{"uid is gone", "[limits]\nuid = 1000", []string{"limits.uid", "uid_range", "no longer share"}},
		{"language gid is gone", "[languages.python.limits]\ngid = 1000", []string{"languages.python.limits.gid", "uid_range"}},
		{"uid range with root", "[limits]\nuid_range = \"0-100\"", []string{"limits.uid_range", "root"}},
		{"uid range with nobody", "[limits]\nuid_range = \"65000-70000\"", []string{"limits.uid_range", "nobody"}},
		{"uid range reversed", "[limits]\nuid_range = \"200-100\"", []string{"limits.uid_range", "above the last"}},
		{"uid range not a range", "[limits]\nuid_range = \"100000\"", []string{"limits.uid_range", "FIRST-LAST"}},
		{"uid range too high", "[limits]\nuid_range = \"100000-4294967295\"", []string{"limits.uid_range", "not a valid uid"}},
		{"uid range per language", "[languages.python.limits]\nuid_range = \"100000-100010\"", []string{"languages.python.limits.uid_range"}},
		{"relative uid lock dir", "[sandbox]\nuid_lock_dir = \"uids\"", []string{"sandbox.uid_lock_dir"}},
		{"relative init", "[sandbox]\ninit = \"tini-static\"", []string{"sandbox.init"}},
		{"no pending signals", "[limits]\npending_signals = 0", []string{"limits.pending_signals"}},
		{"too many ptys", "[languages.python.limits]\nptys = 65", []string{"languages.python.limits.ptys"}},
		{"zero cpus", "[limits]\ncpus = 0.0", []string{"limits.cpus"}},
		{"no image", "[languages.ruby]\ncommand = [\"ruby\"]\nfile = \"main.rb\"", []string{"languages.ruby.image", "empty"}},
		{"no command", "[languages.ruby]\nimage = \"r\"\nfile = \"main.rb\"", []string{"languages.ruby.command"}},
		{"no file", "[languages.ruby]\nimage = \"r\"\ncommand = [\"ruby\"]", []string{"languages.ruby.file"}},
		{"file with a slash", "[languages.python]\nfile = \"../x.py\"", []string{"languages.python.file"}},
		{"duplicate tool", "[languages.javascript]\ntool = \"run_python_code\"", []string{"tool", "unique"}},
		{"bad tool name", "[languages.python]\ntool = \"run python\"", []string{"languages.python.tool"}},
		{"bad env", "[languages.python]\nenv = [\"NOEQUALS\"]", []string{"languages.python.env", "KEY=value"}},
		{"bad pass env", "[sandbox]\npass_through_env = [\"A-B\"]", []string{"sandbox.pass_through_env"}},
		{"bad pull", "[sandbox]\npull = \"always\"", []string{"sandbox.pull"}},
		{"relative state dir", "[sandbox]\nstate_dir = \"run\"", []string{"sandbox.state_dir"}},
		{"no languages", "[languages.python]\ndisabled = true\n[languages.javascript]\ndisabled = true", []string{"no language"}},
		{"bad namespace", "[containerd]\nnamespace = \"a b\"", []string{"containerd.namespace"}},
		{"wrong type", "[limits]\npids = \"many\"", []string{"bad.toml"}},
		{"syntax", "[limits\n", []string{"bad.toml"}},
		{"negative max sessions", "[sessions]\nmax_sessions = -1", []string{"sessions.max_sessions", "0 (no sessions) to 64"}},
		{"too many sessions", "[sessions]\nmax_sessions = 65", []string{"sessions.max_sessions", "to 64"}},
		{"zero idle timeout", "[sessions]\nidle_timeout = \"0s\"", []string{"sessions.idle_timeout", "greater than 0"}},
		{"zero max lifetime", "[sessions]\nmax_lifetime = \"0s\"\nidle_timeout = \"0s\"", []string{"sessions.max_lifetime", "greater than 0"}},
		{"idle over lifetime", "[sessions]\nidle_timeout = \"2h\"", []string{"sessions.idle_timeout", "more than max_lifetime (1h0m0s)"}},
		{"unknown sessions key", "[sessions]\nmax = 3", []string{"sessions.max"}},
		{"unknown session driver", "[languages.python]\nsession_driver = \"ipython\"", []string{"languages.python.session_driver", `"ipython"`, `"python" or "node"`}},
		{"preload with a space", "[languages.python]\npreload = [\"numpy pandas\"]", []string{"languages.python.preload", `"numpy pandas"`, "module name"}},
		{"empty preload", "[languages.python]\npreload = [\"\"]", []string{"languages.python.preload", `""`}},
		{"unknown cgroup driver", "[containerd]\ncgroup_driver = \"systemd-cgroup\"", []string{"containerd.cgroup_driver", `"systemd-cgroup"`, `"cgroupfs"`, `"systemd"`}},
		{"relative runtime binary", "[containerd]\nruntime_binary = \"bin/crun\"", []string{"containerd.runtime_binary", "relative path", `"/usr/bin/crun"`}},
		{"runtime binary a directory", "[containerd]\nruntime_binary = \"/usr/bin/\"", []string{"containerd.runtime_binary", "directory"}},
		{"runtime binary with a space", "[containerd]\nruntime_binary = \"crun \"", []string{"containerd.runtime_binary", "spaces"}},
		{"language runtime binary relative", "[languages.python]\nruntime_binary = \"./crun\"", []string{"languages.python.runtime_binary", "relative path"}},
		{"runtime binary with another shim", "[containerd]\nruntime = \"io.containerd.runsc.v1\"\nruntime_binary = \"crun\"", []string{"containerd.runtime_binary", "runc shim", `"io.containerd.runsc.v1"`}},
		{"systemd with another shim", "[containerd]\nruntime = \"io.containerd.runsc.v1\"\ncgroup_driver = \"systemd\"", []string{"containerd.cgroup_driver", "runc shim", `"io.containerd.runsc.v1"`}},
		{"language shim with a runtime binary", "[containerd]\nruntime_binary = \"crun\"\n[languages.python]\nruntime = \"io.containerd.runsc.v1\"", []string{"languages.python.runtime", `"io.containerd.runsc.v1"`, "runtime_binary", `"crun"`}},
		{"language runtime binary with its shim", "[languages.python]\nruntime = \"io.containerd.kata.v2\"\nruntime_binary = \"/usr/bin/crun\"", []string{"languages.python.runtime", "kata", "runtime_binary"}},
		{"language runtime binary under another shim", "[containerd]\nruntime = \"io.containerd.runsc.v1\"\n[languages.python]\nruntime_binary = \"crun\"", []string{"languages.python.runtime_binary", "runsc", "runc shim"}},
		{"language shim under systemd", "[containerd]\ncgroup_driver = \"systemd\"\n[languages.python]\nruntime = \"io.containerd.runsc.v1\"", []string{"languages.python.runtime", "containerd.cgroup_driver", `"systemd"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.toml, "bad.toml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// A typo names the unknown table or key and the nearest known one, in
// every table; a typo'd language is told as that, not as a new language
// missing its image, command and file (issue 29, item 5).
func TestTypos(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		want       string
	}{
		{"language", "[languages.pyton]\npool = 0", `unknown language "pyton" in [languages.pyton]: did you mean python?`},
		{"language with its own typo", "[languages.pyton]\ncode = 1", "did you mean python?"},
		{"language's limits", "[languages.javscript.limits]\nmemory = \"1GiB\"", "did you mean javascript?"},
		{"table", "[sandbx]\nconcurrency = 2", "unknown key sandbx (did you mean sandbox?)"},
		{"sandbox", "[sandbox]\nconcurency = 2", "sandbox.concurency (did you mean sandbox.concurrency?)"},
		{"limits", "[limits]\nmemroy = \"1GiB\"", "limits.memroy (did you mean limits.memory?)"},
		{"a language's key", "[languages.python]\nimgae = \"x\"", "languages.python.imgae (did you mean languages.python.image?)"},
		{"a language's limit", "[languages.python.limits]\ntimout = \"5s\"", "languages.python.limits.timout (did you mean languages.python.limits.timeout?)"},
		{"http", "[http]\nrate_limt = 5", "http.rate_limt (did you mean http.rate_limit?)"},
		{"sessions", "[sessions]\nmax_sesions = 2", "(did you mean sessions.max_sessions?)"},
		{"containerd", "[containerd]\nnamespac = \"x\"", "(did you mean containerd.namespace?)"},
		{"tasks", "[tasks]\nmax_task = 3", "(did you mean tasks.max_tasks?)"},
		{"audit", "[audit]\npth = \"x\"", "(did you mean audit.path?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.toml, "bad.toml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one with %q", err, tc.want)
			}
			for _, unrelated := range []string{"image: empty", ".command", ".file"} {
				if strings.Contains(err.Error(), unrelated) {
					t.Errorf("error %q tells of %q, which the typo is not about", err, unrelated)
				}
			}
		})
	}
	// A new language far from a known one is a new language: it is told
	// what it lacks. So is one near a known one that is complete.
	if _, err := Parse("[languages.ruby]\ncommand = [\"ruby\"]", "x.toml"); err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), "languages.ruby.image") {
		t.Errorf("a new language without its image: %v; want it told it lacks one", err)
	}
	if _, err := Parse("[languages.pythan]\nimage = \"i\"\ncommand = [\"python3\"]\nfile = \"main.py\"", "x.toml"); err != nil {
		t.Errorf("a complete new language near python: %v; want it accepted", err)
	}
	// An unknown key with nothing near gets no guess.
	if _, err := Parse("[limits]\nxyzzy = 1", "x.toml"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a key near nothing: %v; want unknown key without a guess", err)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Size
	}{
		{"512MiB", 512 << 20}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"1GiB", 1 << 30},
		{"1 GiB", 1 << 30}, {"1.5KiB", 1536}, {"4096", 4096}, {"10B", 10}, {"1KB", 1000}, {"2MB", 2000000},
	} {
		got, err := parseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if back, err := parseSize(got.String()); err != nil || back != got {
			t.Errorf("parseSize(%q.String() = %q) = %d, %v; want it back", tc.in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "MiB", "x", "-1MiB", "1PiB", "99999999999999GiB", "1e400"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d; want an error", in, got)
		}
	}
}

func mustLanguage(t *testing.T, c *Config, name string) Language {
	t.Helper()
	l, ok := c.Language(name)
	if !ok {
		t.Fatalf("Language(%q): not enabled", name)
	}
	return l
}

// Language is the one translation of the file's tables: every field of the
// model comes from its key, the runtime falls back to [containerd]'s, and a
// disabled language is not there.
// The runtime keys that are valid: a binary by name or path, per language
// too, with the runc shim named or left empty, and the systemd driver; a
// language of another shim is fine where [containerd] sets neither.
func TestRuntimeKeys(t *testing.T) {
	c, err := Parse(`
[containerd]
runtime_binary = "crun"
cgroup_driver = "systemd"

[languages.python]
runtime = "io.containerd.runc.v2"
runtime_binary = "/usr/local/bin/runc"
`, "ok.toml")
	if err != nil {
		t.Fatal(err)
	}
	py, js := mustLanguage(t, c, "python"), mustLanguage(t, c, "javascript")
	if py.RuntimeBinary != "/usr/local/bin/runc" || py.CgroupDriver != CgroupDriverSystemd {
		t.Errorf("python: runtime binary %q, cgroup driver %q; want its own /usr/local/bin/runc, systemd", py.RuntimeBinary, py.CgroupDriver)
	}
	if js.Runtime != "" || js.RuntimeBinary != "crun" || js.CgroupDriver != CgroupDriverSystemd {
		t.Errorf("javascript: runtime %q, binary %q, driver %q; want \"\", [containerd]'s crun, systemd", js.Runtime, js.RuntimeBinary, js.CgroupDriver)
	}
	if _, err := Parse("[languages.python]\nruntime = \"io.containerd.runsc.v1\"", "ok.toml"); err != nil {
		t.Errorf("another shim, no runtime binary, cgroupfs: %v; want it accepted", err)
	}
	d := mustLanguage(t, Default(), "python")
	if d.Runtime != "" || d.RuntimeBinary != "" || d.CgroupDriver != CgroupDriverCgroupfs {
		t.Errorf("defaults: runtime %q, binary %q, driver %q; want \"\", \"\", cgroupfs", d.Runtime, d.RuntimeBinary, d.CgroupDriver)
	}
}

func TestLanguageModel(t *testing.T) {
	c, err := Parse(`
[containerd]
runtime = "io.containerd.runsc.v1"

[limits]
memory = "1GiB"
shm_size = "8MiB"
output_bytes = "128KiB"

[languages.python]
runtime = "io.containerd.runc.v2"
pool = 3

[languages.python.limits]
timeout = "45s"
max_timeout = "90s"
code_bytes = "2MiB"
ptys = 0
pending_signals = 64

[languages.javascript]
disabled = true

[languages.sh]
image = "example.test/sh:1"
command = ["sh", "-e"]
file = "main.sh"
env = ["A=1"]
`, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	py := mustLanguage(t, c, "python")
	want := Language{
		Name:          "python",
		Image:         "localhost/code-sandbox-mcp/python:trixie",
		BaseImage:     "localhost/code-sandbox-mcp/python:trixie",
		Command:       []string{"python3"},
		File:          "main.py",
		Env:           []string{"PYTHONUNBUFFERED=1", "MPLBACKEND=Agg", "PYTHONDONTWRITEBYTECODE=1"},
		Runtime:       "io.containerd.runc.v2",
		CgroupDriver:  "cgroupfs",
		Tool:          "run_python_code",
		Description:   c.Languages["python"].Description,
		Pool:          3,
		Figures:       true,
		SessionDriver: "python",
		Warm:          true,
		Preload:       []string{"numpy", "pandas"},
		Limits: Limits{
			MemoryBytes: 1 << 30, CPUs: 1, Pids: 128, TmpBytes: 64 << 20, ShmBytes: 8 << 20,
			FileBytes: 64 << 20, OpenFiles: 1024, Timeout: 45 * time.Second, MaxTimeout: 90 * time.Second, MaxTaskTimeout: time.Hour,
			OutputBytes: 128 << 10, CodeBytes: 2 << 20,
			PendingSignals: 64, MsgQueueBytes: 256 << 10, LockedBytes: 64 << 10, Ptys: 0,
			WorkspaceBytes: 64 << 20, FilesInBytes: 10 << 20, MaxFilesIn: 100, FilesOutBytes: 32 << 20, MaxFilesOut: 100,
			MaxImages: 4, ImageBytes: 1 << 20,
		},
	}
	if !reflect.DeepEqual(py, want) {
		t.Errorf("Language(python):\n got %+v\nwant %+v", py, want)
	}
	if sh := mustLanguage(t, c, "sh"); sh.Runtime != "io.containerd.runsc.v1" || sh.Tool != "run_sh_code" || sh.Limits.Timeout != 30*time.Second {
		t.Errorf("Language(sh) = %+v; want [containerd] runtime, tool run_sh_code, the default timeout", sh)
	}
	if _, ok := c.Language("javascript"); ok {
		t.Error("Language(javascript) is there; want a disabled language left out")
	}
	var names []string
	for _, l := range c.Enabled() {
		names = append(names, l.Name)
	}
	if !reflect.DeepEqual(names, []string{"python", "sh"}) {
		t.Errorf("Enabled() names %v; want [python sh]", names)
	}
	// The model is a copy: changing it changes nothing in the config.
	py.Command[0] = "changed"
	if mustLanguage(t, c, "python").Command[0] != "python3" {
		t.Error("Language shares its Command with the config")
	}
}

// Sessions: the [sessions] table, and each language's driver, which a new
// language has only if it says so.
func TestSessions(t *testing.T) {
	c, err := Parse(`
[sessions]
max_sessions = 0
idle_timeout = "30s"
max_lifetime = "5m"

[languages.javascript]
session_driver = ""

[languages.py2]
image = "example.test/python:other"
command = ["python3", "-X", "utf8"]
file = "main.py"
session_driver = "python"

[languages.sh]
image = "example.test/sh:1"
command = ["sh"]
file = "main.sh"
`, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Sessions{MaxSessions: 0, IdleTimeout: Duration(30 * time.Second), MaxLifetime: Duration(5 * time.Minute)}); c.Sessions != want {
		t.Errorf("Sessions = %+v; want %+v", c.Sessions, want)
	}
	for name, want := range map[string]string{"python": "python", "javascript": "", "py2": "python", "sh": ""} {
		if got := mustLanguage(t, c, name).SessionDriver; got != want {
			t.Errorf("languages.%s: SessionDriver %q; want %q", name, got, want)
		}
	}
	// Max 64, and an idle timeout equal to the lifetime, are fine.
	if _, err := Parse("[sessions]\nmax_sessions = 64\nidle_timeout = \"1h\"", "test.toml"); err != nil {
		t.Error(err)
	}
	// A disabled language's driver is not checked, as nothing of it is.
	if _, err := Parse("[languages.javascript]\ndisabled = true\nsession_driver = \"deno\"", "test.toml"); err != nil {
		t.Error(err)
	}
}

func TestHTTP(t *testing.T) {
	if h := Default().HTTP; h.AuthTokens != "" || len(h.AllowedOrigins) != 0 || h.MetricsAddr != "" {
		t.Errorf("default [http] = %+v; want no tokens, no origins and no metrics listener", h)
	}
	p := filepath.Join(t.TempDir(), "sandbox.toml")
	if err := os.WriteFile(p, []byte("[http]\nauth_tokens = \"/etc/csm/tokens\"\nallowed_origins = [\"https://a.example\"]\nmetrics_addr = \"127.0.0.1:9464\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	want := HTTP{AuthTokens: "/etc/csm/tokens", AllowedOrigins: []string{"https://a.example"}, RateLimit: 120, RateBurst: 20, MetricsAddr: "127.0.0.1:9464",
		ReadTimeout: Duration(time.Minute), WriteTimeout: Duration(time.Minute), IdleTimeout: Duration(30 * time.Second),
		MaxConnections: 256, MaxConnectionsPerClient: 64}
	if !reflect.DeepEqual(c.HTTP, want) {
		t.Errorf("[http] = %+v; want %+v", c.HTTP, want)
	}
}

func TestRequestBytes(t *testing.T) {
	// The defaults: code_bytes 1MiB, files_in_bytes 10MiB, max_files_in
	// 100, for both languages.
	if got, want := Default().RequestBytes(), int64(2*(11<<20)+100*2*4096+1<<20); got != want {
		t.Errorf("default RequestBytes() = %d; want %d", got, want)
	}
	c, err := Parse("[languages.python.limits]\nfiles_in_bytes = \"40MiB\"", "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.RequestBytes(), int64(2*(41<<20)+100*2*4096+1<<20); got != want {
		t.Errorf("with python's files_in_bytes 40MiB: RequestBytes() = %d; want %d, the largest language's", got, want)
	}
	if c, err = Parse("[http]\nmax_request_bytes = \"2MiB\"", "x.toml"); err != nil {
		t.Fatal(err)
	}
	if got := c.RequestBytes(); got != 2<<20 {
		t.Errorf("with max_request_bytes 2MiB: RequestBytes() = %d; want %d", got, 2<<20)
	}
}

// A lone client, or none named (HTTP without tokens), has all of
// concurrency unless per_client_concurrency says otherwise: one client's
// two parallel calls on a 2-CPU host both run (issue 29, item 3).
func TestClientConcurrencyOfALoneClient(t *testing.T) {
	for _, tc := range []struct {
		toml       string
		principals int
		want       int
	}{
		{"[sandbox]\nconcurrency = 2", 1, 2},
		{"[sandbox]\nconcurrency = 2", 0, 2},
		{"[sandbox]\nconcurrency = 2", 2, 1},
		{"[sandbox]\nconcurrency = 8", 1, 8},
		{"[sandbox]\nconcurrency = 8", 5, 4},
		{"[sandbox]\nconcurrency = 8\n[http]\nper_client_concurrency = 3", 1, 3},
		{"[sandbox]\nconcurrency = 8\n[http]\nper_client_concurrency = 3", 0, 3},
	} {
		c, err := Parse(tc.toml, "x.toml")
		if err != nil {
			t.Fatalf("%q: %v", tc.toml, err)
		}
		if got := c.ClientConcurrency(tc.principals); got != tc.want {
			t.Errorf("%q with %d clients: ClientConcurrency = %d; want %d", tc.toml, tc.principals, got, tc.want)
		}
	}
}

func TestClientLimits(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tc := range []struct {
		toml      string
		want      int // with several clients
		rate, brs int
	}{
		{"", max(1, cpus/2), 120, 20},
		{"[sandbox]\nconcurrency = 8", 4, 120, 20},
		{"[sandbox]\nconcurrency = 1", 1, 120, 20},
		{"[sandbox]\nconcurrency = 3", 1, 120, 20},
		{"[sandbox]\nconcurrency = 8\n[http]\nper_client_concurrency = 8", 8, 120, 20},
		{"[sandbox]\nconcurrency = 4\n[http]\nper_client_concurrency = 1\nrate_limit = 6\nrate_burst = 2", 1, 6, 2},
		{"[http]\nrate_limit = 0\nrate_burst = 0", max(1, cpus/2), 0, 0},
	} {
		c, err := Parse(tc.toml, "x.toml")
		if err != nil {
			t.Errorf("%q: %v", tc.toml, err)
			continue
		}
		if got := c.ClientConcurrency(3); got != tc.want {
			t.Errorf("%q: ClientConcurrency(3) = %d; want %d", tc.toml, got, tc.want)
		}
		if c.HTTP.RateLimit != tc.rate || c.HTTP.RateBurst != tc.brs {
			t.Errorf("%q: rate_limit %d, rate_burst %d; want %d, %d", tc.toml, c.HTTP.RateLimit, c.HTTP.RateBurst, tc.rate, tc.brs)
		}
	}
	for _, tc := range []struct {
		toml string
		want []string
	}{
		{"[sandbox]\nconcurrency = 4\n[http]\nper_client_concurrency = 5", []string{"http.per_client_concurrency: 5 is more than sandbox.concurrency (4)", "want 1 to 4, or 0 for all of it with one client, half with several"}},
		{fmt.Sprintf("[http]\nper_client_concurrency = %d", cpus+1), []string{"http.per_client_concurrency", "the number of CPUs", fmt.Sprintf("(%d)", cpus)}},
		{"[http]\nper_client_concurrency = -1", []string{"http.per_client_concurrency: -1 is negative"}},
		{"[http]\nrate_limit = -1", []string{"http.rate_limit: -1 is negative", "0 for no limit"}},
		{"[http]\nrate_burst = 0", []string{"http.rate_burst: 0; want at least 1", "(120 a minute)"}},
		{"[http]\nidle_timeout = \"0s\"", []string{"http.idle_timeout: 0s must be greater than 0"}},
		{"[http]\nread_timeout = \"-1s\"", []string{"http.read_timeout: -1s must be greater than 0"}},
		{"[http]\nmax_connections = -1", []string{"http.max_connections: -1 is negative", "0 for no bound"}},
		{"[http]\nmax_connections = 8\nmax_connections_per_client = 9", []string{"http.max_connections_per_client: 9 is more than max_connections (8)"}},
	} {
		_, err := Parse(tc.toml, "bad.toml")
		if err == nil {
			t.Errorf("%q: no error", tc.toml)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not mention %q", tc.toml, err, w)
			}
		}
	}
}

func TestAudit(t *testing.T) {
	if a := Default().Audit; a != (Audit{}) {
		t.Errorf("default [audit] = %+v; want no log and no code", a)
	}
	c, err := Parse("[audit]\npath = \"/var/log/csm/audit.log\"\ninclude_code = true\n", "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Audit{Path: "/var/log/csm/audit.log", IncludeCode: true}); c.Audit != want {
		t.Errorf("[audit] = %+v; want %+v", c.Audit, want)
	}
	for _, p := range []string{"-", "audit.log", "/var/log/a.log"} {
		if _, err := Parse(fmt.Sprintf("[audit]\npath = %q\n", p), "t.toml"); err != nil {
			t.Errorf("path %q: %v", p, err)
		}
	}
	for _, p := range []string{"/var/log/", " a.log", "a\x00b"} {
		if _, err := Parse(fmt.Sprintf("[audit]\npath = %q\n", p), "t.toml"); err == nil || !strings.Contains(err.Error(), "audit.path") {
			t.Errorf("path %q: got %v; want an audit.path error", p, err)
		}
	}
}

func TestInterpreter(t *testing.T) {
	for _, tc := range []struct {
		driver  string
		command []string
		want    string
	}{
		{"python", []string{"/opt/py/bin/run"}, "python"},
		{"", []string{"python3.13", "-X", "dev"}, "python"},
		{"", []string{"/usr/bin/python3"}, "python"},
		{"", []string{"nodejs"}, "node"},
		{"", []string{"node"}, "node"},
		{"", []string{"bash"}, ""},
		{"", nil, ""},
	} {
		l := Language{SessionDriver: tc.driver, Command: tc.command}
		if got := l.Interpreter(); got != tc.want {
			t.Errorf("Interpreter() of session_driver %q, command %q = %q; want %q", tc.driver, tc.command, got, tc.want)
		}
	}
}

func TestPackages(t *testing.T) {
	c, err := Parse(`
[languages.python]
packages = { pip = ["Tabulate==0.9.0", "seaborn", "seaborn"], apt = ["libgomp1"] }
`, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	py := mustLanguage(t, c, "python")
	want := Packages{Apt: []string{"libgomp1"}, Pip: []string{"seaborn", "tabulate==0.9.0"}}
	if !reflect.DeepEqual(py.Packages, want) {
		t.Errorf("Packages = %+v; want %+v, normalised", py.Packages, want)
	}
	if py.BaseImage != "localhost/code-sandbox-mcp/python:trixie" || py.Image != PackagesImage("python", py.BaseImage, want) ||
		!strings.HasPrefix(py.Image, "localhost/code-sandbox-mcp/python-packages:") {
		t.Errorf("Image %q, BaseImage %q; want the packages image on the table's image", py.Image, py.BaseImage)
	}
	// The same lists in another order or spelling are the same image;
	// another list or base is another.
	same, err := Parse("[languages.python]\npackages = { apt = [\"libgomp1\"], pip = [\"seaborn\", \"tabulate==0.9.0\"] }\n", "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLanguage(t, same, "python").Image; got != py.Image {
		t.Errorf("the same packages differently written give %q; want %q", got, py.Image)
	}
	for _, other := range []string{
		PackagesImage("python", py.BaseImage, Packages{Pip: want.Pip}),
		PackagesImage("python", "example.test/python:1", want),
		PackagesImage("python", py.BaseImage, Packages{Apt: want.Apt, Npm: want.Pip}),
	} {
		if other == py.Image {
			t.Errorf("other packages or another base give %q too", other)
		}
	}
	// Without packages the image is the table's, and the defaults are not
	// written into by a file that sets them.
	if js := mustLanguage(t, c, "javascript"); js.Image != "localhost/code-sandbox-mcp/nodejs:trixie" || !js.Packages.Empty() {
		t.Errorf("javascript: Image %q, Packages %+v; want the table's image and none", js.Image, js.Packages)
	}
	if d := Default().Languages["python"].Packages; !d.Empty() {
		t.Errorf("the defaults' python packages became %+v", d)
	}

	for _, tc := range []struct{ toml, want string }{
		{`packages = { pip = ["x>=1"] }`, `languages.python.packages.pip: pip package "x>=1": want NAME or NAME==VERSION`},
		{`packages = { npm = ["Upper"] }`, `languages.python.packages.npm: npm package "Upper"`},
		{`packages = { apt = ["-oX=1"] }`, `languages.python.packages.apt: apt package "-oX=1"`},
		{`packages = { pipp = ["x"] }`, `languages.python.packages.pipp`},
	} {
		_, err := Parse("[languages.python]\n"+tc.toml+"\n", "test.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.toml, err, tc.want)
		}
	}
}
