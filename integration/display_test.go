package integration

// display() and rich last expressions (issue 29): through the real server,
// as a model reads them, in a session and in a one-shot run.

import (
	"strings"
	"testing"
)

// dfCell prints around display() of a small DataFrame; dfTable is the
// Markdown table it must show between the prints.
const (
	dfCell = `import pandas as pd
df = pd.DataFrame({'alpha': [1, 2], 'beta': ['x', 'y']})
print('before')
display(df)
print('after')`
	dfTable = "|  | alpha | beta |\n|---|---|---|\n| 0 | 1 | x |\n| 1 | 2 | y |\n"
)

// In a session: display() of a DataFrame is a Markdown table in the text,
// in order with the prints around it, and so is a large one as the last
// expression, cut as pandas cuts it; a figure is one image, saved once;
// an object with _repr_html_ or _repr_svg_ is an embedded resource of
// that type; a plain object is its repr.
func TestSessionDisplay(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	var py createdSession
	if text, isErr := callRaw(ctx, t, s.c, "create_session", map[string]any{"language": "python"}, &py); isErr {
		t.Fatalf("create_session: %s", text)
	}
	run := func(code string) toolResult {
		t.Helper()
		r := s.call(ctx, t, "run_python_code", map[string]any{"code": code, "session_id": py.SessionID})
		if r.isError || r.out.Stderr != "" {
			t.Fatalf("cell %q: %q, stderr %q", code, r.text, r.out.Stderr)
		}
		return r
	}

	r := run(dfCell)
	if want := "before\n" + dfTable + "after\n"; r.out.Stdout != want || !strings.HasPrefix(r.text, want) || len(r.out.Files) != 0 {
		t.Errorf("display(df): stdout %q, text %q, files %+v; want stdout %q and no files", r.out.Stdout, r.text, r.out.Files, want)
	}

	r = run("import numpy as np\nbig = pd.DataFrame(np.arange(3000).reshape(100, 30))\nbig")
	lines := strings.Split(strings.TrimSuffix(r.out.Stdout, "\n"), "\n")
	// The header, |---|, 5 rows, "...", 5 rows, a blank line, the shape.
	if len(lines) != 15 || !strings.HasPrefix(lines[0], "|  | 0 | 1 |") || !strings.Contains(lines[0], "| ... |") ||
		!strings.HasPrefix(lines[7], "| ... |") || !strings.HasPrefix(lines[12], "| 99 | 2970 |") || lines[14] != "[100 rows x 30 columns]" {
		t.Errorf("a large DataFrame as the last expression:\n%s\nwant a table of 10 rows and 20 columns around ... and the shape", r.out.Stdout)
	}
	if r = run("print(type(_).__name__)"); r.out.Stdout != "DataFrame\n" {
		t.Errorf("_ after a rich last expression: %q; want the DataFrame", r.out.Stdout)
	}

	r = run("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\ndisplay(fig)\nprint('shown')")
	if len(r.images) != 1 || len(r.out.Files) != 1 || r.out.Files[0].Path != "figures/figure-1.png" || r.out.Stdout != "shown\n" {
		t.Errorf("display(fig): %d images, files %+v, stdout %q; want figures/figure-1.png alone, saved once", len(r.images), r.out.Files, r.out.Stdout)
	} else {
		pngSize(t, r.images[0])
	}
	r = run("plt.plot([3, 1])\nplt.gcf()")
	if len(r.images) != 1 || len(r.out.Files) != 1 || r.out.Files[0].Path != "figures/figure-2.png" || r.out.Stdout != "" {
		t.Errorf("a figure as the last expression: %d images, files %+v, stdout %q; want figures/figure-2.png alone", len(r.images), r.out.Files, r.out.Stdout)
	}

	r = run(`class H:
    def _repr_html_(self):
        return '<table><tr><td>hi</td></tr></table>'
class S:
    def _repr_svg_(self):
        return '<svg xmlns="http://www.w3.org/2000/svg"/>'
    def _repr_html_(self):
        return 'not this'
display(H(), S())`)
	got := map[string]string{}
	for _, res := range r.resources {
		got[res.MIMEType] = res.Text
		if !runURI.MatchString(res.URI) {
			t.Errorf("resource URI %q; want the run's file", res.URI)
		}
	}
	if len(r.resources) != 2 || got["text/html"] != "<table><tr><td>hi</td></tr></table>" || got["image/svg+xml"] != `<svg xmlns="http://www.w3.org/2000/svg"/>` || r.out.Stdout != "" {
		t.Errorf("display of _repr_html_ and _repr_svg_: resources %+v, stdout %q; want the HTML and the SVG embedded", r.resources, r.out.Stdout)
	}

	r = run("class P:\n    def __repr__(self):\n        return 'P!'\ndisplay(P(), 'x', 3)\nP()")
	if r.out.Stdout != "P!\n'x'\n3\nP!\n" || len(r.out.Files) != 0 || len(r.resources) != 0 {
		t.Errorf("plain objects: stdout %q, files %+v; want their reprs", r.out.Stdout, r.out.Files)
	}
}

// In a one-shot run display() works as in a session (a run has no last
// expression to show), and a displayed figure left open is not saved a
// second time at exit; HTML over the bound falls back to the repr.
func TestDisplayOneShot(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	r := s.call(ctx, t, "run_python_code", code(dfCell+"\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\ndisplay(plt.gcf())\n42"))
	if want := "before\n" + dfTable + "after\n"; r.isError || r.out.Stdout != want || r.out.Stderr != "" {
		t.Errorf("display(df) in a one-shot run: %q, stdout %q; want %q", r.text, r.out.Stdout, want)
	}
	if len(r.images) != 1 || len(r.out.Files) != 1 || r.out.Files[0].Path != "figures/figure-1.png" {
		t.Errorf("display(fig) in a one-shot run: %d images, files %+v; want figures/figure-1.png alone", len(r.images), r.out.Files)
	}
	// HTML over 256 KiB is shown as text, with a line on stderr.
	r = s.call(ctx, t, "run_python_code", code("class Big:\n    def _repr_html_(self):\n        return 'x' * 300000\n    def __repr__(self):\n        return 'Big()'\ndisplay(Big())"))
	if r.out.Stdout != "Big()\n" || !strings.Contains(r.out.Stderr, "over 262144") || len(r.resources) != 0 || len(r.out.Files) != 0 {
		t.Errorf("display of HTML over 256 KiB: stdout %q, stderr %q, %d resources, files %+v; want its repr and a line on stderr", r.out.Stdout, r.out.Stderr, len(r.resources), r.out.Files)
	}
}
