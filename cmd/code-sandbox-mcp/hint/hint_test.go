package hint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

var (
	python = config.Language{Name: "python", Command: []string{"python3", "-u"}}
	// proxied is python with a network.
	proxied = config.Language{Name: "python", Command: []string{"python3", "-u"}, Network: &config.Network{Allow: []string{"api.example.com", "*.pypi.example"}}}
	node    = config.Language{Name: "javascript", Command: []string{"node"}}
)

// stderrOf reads a stderr that a program left in the real sandbox images
// (testdata: Python 3.13 with requests, Node.js 20, one-shot runs and
// session cells).
func stderrOf(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// moduleLine is the start of the hint on a missing module.
func moduleLine(name string) string {
	return "hint: the module '" + name + "' is not in this sandbox's image"
}

func TestFor(t *testing.T) {
	const pyTraceback = "Traceback (most recent call last):\n  File \"/sandbox/main.py\", line 1, in <module>\n    import seaborn\n"
	tests := []struct {
		name    string
		lang    config.Language
		stderr  string // or file, from testdata
		file    string
		stdout  string
		exit    int
		timeout bool
		oom     bool
		signal  string
		modules []string
		want    string // "" for none; else a prefix
		wantIn  []string
	}{
		// Python, as the interpreter reports it.
		{name: "python missing module", lang: python, file: "py-module.txt", exit: 1,
			want:   moduleLine("seaborn_not_here"),
			wantIn: []string{"no network", "`code-sandbox-mcp images build --from python --pip seaborn_not_here`"}},
		{name: "python missing module, similar ones", lang: python, exit: 1,
			stderr:  pyTraceback + "ModuleNotFoundError: No module named 'seaborn'\n",
			modules: []string{"numpy", "seaborn2", "Seaborn", "sea", "_seaborn", "matplotlib"},
			want:    moduleLine("seaborn"), wantIn: []string{"similar modules there: Seaborn, seaborn2, sea."}},
		{name: "python missing module whose package is named otherwise", lang: python, exit: 1,
			stderr: pyTraceback + "ModuleNotFoundError: No module named 'sklearn'\n",
			want:   moduleLine("sklearn"), wantIn: []string{"--pip scikit-learn`"}},
		{name: "python dotted module whose parent is there", lang: python, file: "py-module-dotted.txt", exit: 1,
			want: moduleLine("xml.nothere"), wantIn: []string{"the package that provides it", "--pip PACKAGE`"}},
		{name: "python dotted import whose parent is missing", lang: python, file: "py-module-parent.txt", exit: 1,
			want: moduleLine("nothere")},
		{name: "python module the image holds", lang: python, exit: 1,
			stderr: pyTraceback + "ModuleNotFoundError: No module named 'numpy'\n", modules: []string{"numpy"}},
		{name: "python getaddrinfo", lang: python, file: "py-getaddrinfo.txt", exit: 1, want: Network},
		{name: "python requests, name resolution", lang: python, file: "py-requests-resolve.txt", exit: 1, want: Network},
		{name: "python urllib, name resolution", lang: python, file: "py-urllib-resolve.txt", exit: 1, want: Network},
		{name: "python connect, unreachable", lang: python, file: "py-unreachable.txt", exit: 1, want: Network},
		{name: "python requests, refused on the loopback", lang: python, file: "py-requests-refused.txt", exit: 1, want: Refused},
		{name: "python session cell", lang: python, file: "py-session-requests.txt", exit: 1, want: Network},
		// A language with a network: its way out is the proxy.
		{name: "python getaddrinfo, with a network", lang: proxied, file: "py-getaddrinfo.txt", exit: 1,
			want: "hint: the sandbox reaches only api.example.com, *.pypi.example, and only through its HTTP proxy"},
		{name: "python refused, with a network", lang: proxied, file: "py-requests-refused.txt", exit: 1,
			want: "hint: the sandbox reaches only api.example.com, *.pypi.example,"},
		{name: "python missing module, with a network", lang: proxied, file: "py-module.txt", exit: 1,
			want: moduleLine("seaborn_not_here") + ". If the program needs it"},
		{name: "python two errors: the last one counts", lang: python, exit: 1,
			stderr: pyTraceback + "ModuleNotFoundError: No module named 'seaborn'\n\nDuring handling of the above exception, another exception occurred:\n\n" +
				pyTraceback + "socket.gaierror: [Errno -3] Temporary failure in name resolution\n",
			want: Network},
		{name: "python error caught, another ends the run", lang: python, exit: 1,
			stderr: "ModuleNotFoundError: No module named 'seaborn'\n" + pyTraceback + "ZeroDivisionError: division by zero\n"},
		{name: "python caught, exit 0", lang: python, file: "py-module.txt", exit: 0},
		{name: "python words on stdout", lang: python, exit: 1,
			stdout: pyTraceback + "ModuleNotFoundError: No module named 'seaborn'\n"},
		{name: "python words on stderr without a traceback", lang: python, exit: 1,
			stderr: "ModuleNotFoundError: No module named 'seaborn'\n"},
		{name: "python timed out", lang: python, file: "py-module.txt", exit: 137, timeout: true, signal: "SIGKILL"},
		{name: "python out of memory", lang: python, file: "py-getaddrinfo.txt", exit: 137, oom: true, signal: "SIGKILL"},
		{name: "python killed by a signal", lang: python, file: "py-getaddrinfo.txt", exit: 143, signal: "SIGTERM"},

		// Node.js, as it reports an uncaught error.
		{name: "node require", lang: node, file: "js-require.txt", exit: 1,
			want: moduleLine("left-pad-not-here"), wantIn: []string{"images build --from javascript --npm left-pad-not-here`."}},
		{name: "node require of a scoped package's file", lang: node, file: "js-require-scoped.txt", exit: 1,
			want: moduleLine("@scope/pkg-not-here")},
		{name: "node require of a relative path", lang: node, file: "js-require-relative.txt", exit: 1},
		{name: "node import", lang: node, file: "js-import.txt", exit: 1, want: moduleLine("left-pad-not-here")},
		{name: "node session require", lang: node, file: "js-session-require.txt", exit: 1, want: moduleLine("left-pad-not-here")},
		{name: "node session import", lang: node, file: "js-session-import.txt", exit: 1, want: moduleLine("left-pad-not-here")},
		{name: "node fetch", lang: node, file: "js-fetch.txt", exit: 1, want: Network},
		{name: "node fetch of a bad port", lang: node, file: "js-fetch-bad-port.txt", exit: 1},
		{name: "node session fetch", lang: node, file: "js-session-fetch.txt", exit: 1, want: Network},
		{name: "node http", lang: node, file: "js-http.txt", exit: 1, want: Network},
		{name: "node connect, unreachable", lang: node, file: "js-unreachable.txt", exit: 1, want: Network},
		{name: "node connect, refused", lang: node, file: "js-refused.txt", exit: 1, want: Refused},
		{name: "node error without its code", lang: node, exit: 1,
			stderr: "/sandbox/main.js:1\nthrow new Error(\"Cannot find module 'x'\")\n^\n\nError: Cannot find module 'x'\n    at Object.<anonymous> (/sandbox/main.js:1:7)\n\nNode.js v20.19.2\n"},
		{name: "node logged error, another ends the run", lang: node, exit: 1,
			stderr: string(stderrOf(t, "js-fetch.txt")) + "/sandbox/main.js:3\nnull.x\n     ^\n\nTypeError: Cannot read properties of null (reading 'x')\n    at Object.<anonymous> (/sandbox/main.js:3:6)\n\nNode.js v20.19.2\n"},
		{name: "node two errors: the last one counts", lang: node, exit: 1,
			stderr: string(stderrOf(t, "js-require.txt")) + string(stderrOf(t, "js-http.txt")), want: Network},
		{name: "node caught, exit 0", lang: node, file: "js-require.txt", exit: 0},
		{name: "node words on stdout", lang: node, exit: 1, stdout: string(stderrOf(t, "js-require.txt"))},
		{name: "node timed out", lang: node, file: "js-fetch.txt", exit: 137, timeout: true, signal: "SIGKILL"},

		// A language whose interpreter is neither.
		{name: "other interpreter", lang: config.Language{Name: "sh", Command: []string{"sh"}}, file: "py-module.txt", exit: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr := []byte(tt.stderr)
			if tt.file != "" {
				stderr = stderrOf(t, tt.file)
			}
			r := &exec.Result{Stdout: []byte(tt.stdout), Stderr: stderr, ExitCode: tt.exit, TimedOut: tt.timeout, OOMKilled: tt.oom, Signal: tt.signal}
			got := For(r, tt.lang, tt.modules)
			switch {
			case tt.want == "" && got != "":
				t.Fatalf("got %q; want no hint", got)
			case !strings.HasPrefix(got, tt.want):
				t.Fatalf("got %q; want a hint starting %q", got, tt.want)
			case strings.Contains(got, "\n"):
				t.Errorf("got %q; want one line", got)
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(got, w) {
					t.Errorf("got %q; want it to contain %q", got, w)
				}
			}
			if tt.want != "" && tt.modules == nil && strings.Contains(got, "similar") {
				t.Errorf("got %q; want no similar modules when none are known", got)
			}
		})
	}
}

func TestSimilar(t *testing.T) {
	modules := []string{"numpy", "pandas", "matplotlib", "requests", "scipy", "sklearn", "mpl_toolkits", "_private", "np"}
	tests := []struct {
		name string
		want []string
	}{
		{"nump", []string{"numpy"}},
		{"Numpy", []string{"numpy"}},
		{"panda", []string{"pandas"}},
		{"request", []string{"requests"}},
		{"scikit", nil},
		{"matplotlib.pyplot", []string{"matplotlib"}},
		{"plot", []string{"matplotlib"}},
		{"mpl", []string{"mpl_toolkits"}},
		{"private", nil},
		{"xy", nil},
		{"np", nil}, // itself
		{"numpy", nil},
		{"sci", []string{"scipy"}},
	}
	for _, tt := range tests {
		if got := Similar(tt.name, modules); !slices.Equal(got, tt.want) {
			t.Errorf("Similar(%q) = %q; want %q", tt.name, got, tt.want)
		}
	}
	many := []string{"seaborn1", "seaborn2", "seaborn3", "seaborn4", "seaborn"}
	if got := Similar("seaborn", many); !slices.Equal(got, []string{"seaborn1", "seaborn2", "seaborn3"}) {
		t.Errorf("Similar(seaborn) = %q; want the three nearest", got)
	}
	if got := Similar("seaborn", nil); got != nil {
		t.Errorf("Similar with no modules = %q; want none", got)
	}
}
