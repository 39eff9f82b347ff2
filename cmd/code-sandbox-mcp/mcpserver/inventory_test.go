package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/inventory"
	"code-sandbox-mcp/oci"
)

// pythonImage is what the default Python image holds, in part.
var pythonImage = &inventory.Inventory{
	Python:  "3.13.5",
	Debian:  []inventory.Package{{Name: "python3", Version: "3.13.5-1"}},
	Pip:     []inventory.Package{{Name: "numpy", Version: "2.2.4"}, {Name: "pandas", Version: "2.2.3"}},
	Modules: []string{"numpy", "pandas"},
	Notable: []inventory.Package{{Name: "numpy", Version: "2.2.4"}, {Name: "pandas", Version: "2.2.3"}},
}

// inventoryServer connects to a server of the default languages whose
// Python image holds pythonImage, and whose Node.js image is not known,
// with err.
func inventoryServer(t *testing.T, err error) *client.Client {
	t.Helper()
	o := testOptions
	o.Inventory = func(ctx context.Context, language string) (*inventory.Inventory, error) {
		if language == "python" {
			return pythonImage, nil
		}
		return nil, err
	}
	s, serr := New(t.Context(), o, config.Default().Enabled(), noRun(t))
	if serr != nil {
		t.Fatal(serr)
	}
	return connect(t, s, nil)
}

// TestDescriptionsNameTheImagesPackages: tools/list names the version and
// packages the image's inventory gives, says nothing of packages where it
// is not known, and says in both that nothing can be installed.
func TestDescriptionsNameTheImagesPackages(t *testing.T) {
	c := inventoryServer(t, errors.New("image localhost/x is not in containerd namespace"))
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	desc := map[string]string{}
	for _, tool := range res.Tools {
		desc[tool.Name] = tool.Description
	}
	py, js := desc["run_python_code"], desc["run_js_code"]
	for _, want := range []string{"Python 3.13.5.", "Packages in the image: numpy 2.2.4, pandas 2.2.3.", "Nothing can be installed at run time (no network, read-only image); the operator adds packages with `code-sandbox-mcp images build`."} {
		if !strings.Contains(py, want) {
			t.Errorf("run_python_code description: got %q; want it to say %q", py, want)
		}
	}
	if strings.Contains(js, "Packages") || strings.Contains(js, "Node.js 2") || !strings.Contains(js, "Nothing can be installed at run time") {
		t.Errorf("run_js_code description, whose image is not known: got %q; want no packages or version, and that nothing can be installed", js)
	}
}

// TestEnvironmentsListTheImage: the environments resource gives the
// whole inventory of a language whose image is known, and leaves it out
// of one whose image is not.
func TestEnvironmentsListTheImage(t *testing.T) {
	env := readEnvironments(t, inventoryServer(t, errors.New("not known")))
	got := env.Languages["python"].ImageContents
	if got == nil || got.LanguageVersion != "3.13.5" || fmt.Sprint(got.Python) != fmt.Sprint(pythonImage.Pip) ||
		fmt.Sprint(got.Notable) != fmt.Sprint(pythonImage.Notable) || fmt.Sprint(got.Debian) != fmt.Sprint(pythonImage.Debian) || got.NPM == nil {
		t.Errorf("python image_contents: got %+v; want the inventory of %+v, npm an empty list", got, pythonImage)
	}
	if js := env.Languages["javascript"].ImageContents; js != nil {
		t.Errorf("javascript image_contents: got %+v; want none: its image is not known", js)
	}
}

func TestImageSentence(t *testing.T) {
	python := config.Language{Name: "python", Command: []string{"python3"}}
	node := config.Language{Name: "javascript", Command: []string{"node"}}
	closed := sandbox{Posture: oci.Posture{ReadOnlyRoot: true}}
	many := make([]inventory.Package, 15)
	for i := range many {
		many[i] = inventory.Package{Name: fmt.Sprintf("p%02d", i), Version: "1.0"}
	}
	for _, tc := range []struct {
		name string
		l    config.Language
		sb   sandbox
		inv  *inventory.Inventory
		want string
	}{
		{"not known", python, closed, nil,
			"Nothing can be installed at run time (no network, read-only image); the operator adds packages with `code-sandbox-mcp images build`."},
		{"bounded", python, closed, &inventory.Inventory{Python: "3.13.5", Pip: many, Notable: many},
			"Python 3.13.5. Packages in the image: p00 1.0, p01 1.0, p02 1.0, p03 1.0, p04 1.0, p05 1.0, p06 1.0, p07 1.0, p08 1.0, p09 1.0, p10 1.0, p11 1.0 and 3 more (all in sandbox://environments). Nothing can be installed at run time (no network, read-only image); the operator adds packages with `code-sandbox-mcp images build`."},
		{"no packages", python, closed, &inventory.Inventory{Python: "3.13.5", Node: "20.19.2"},
			"Python 3.13.5. The image has no Python packages beyond the standard library. Nothing can be installed at run time (no network, read-only image); the operator adds packages with `code-sandbox-mcp images build`."},
		{"node", node, sandbox{Posture: oci.Posture{Network: true, ReadOnlyRoot: true}}, &inventory.Inventory{Node: "20.19.2", Python: "3.13.5"},
			"Node.js 20.19.2. The image has no npm packages: require() Node.js's built-in modules only. The operator adds packages to the image with `code-sandbox-mcp images build`."},
		{"pip through a proxy", python, sandbox{Posture: oci.Posture{Network: true, ReadOnlyRoot: true}, Allow: []string{"pypi.example"}}, &inventory.Inventory{Python: "3.13.5", Pip: []inventory.Package{{Name: "pip", Version: "25.1.1"}}, Notable: []inventory.Package{{Name: "pip", Version: "25.1.1"}}},
			"Python 3.13.5. Packages in the image: pip 25.1.1. `pip install` works through the proxy from an allowed index; packages go to the user site under HOME and last as long as the sandbox (a session's lifetime). The operator adds packages to the image with `code-sandbox-mcp images build`."},
		{"pip without a proxy", python, closed, &inventory.Inventory{Python: "3.13.5", Pip: []inventory.Package{{Name: "pip", Version: "25.1.1"}}, Notable: []inventory.Package{{Name: "pip", Version: "25.1.1"}}},
			"Python 3.13.5. Packages in the image: pip 25.1.1. Nothing can be installed at run time (no network, read-only image); the operator adds packages with `code-sandbox-mcp images build`."},
		{"a package without a version", node, sandbox{}, &inventory.Inventory{NPM: []inventory.Package{{Name: "acorn-walk"}}, Notable: []inventory.Package{{Name: "acorn-walk"}}},
			"Packages in the image: acorn-walk. Nothing can be installed at run time (no network); the operator adds packages with `code-sandbox-mcp images build`."},
	} {
		if got := imageSentence(tc.l, tc.sb, tc.inv); got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestInventoriesModules: Modules gives what the last refresh read, and
// nothing for a language whose image is not known.
func TestInventoriesModules(t *testing.T) {
	langs := config.Default().Enabled()
	iv := newInventories(func(ctx context.Context, language string) (*inventory.Inventory, error) {
		if language == "python" {
			return pythonImage, nil
		}
		return nil, errors.New("not known")
	}, langs)
	if got := iv.Modules("python"); got != nil {
		t.Errorf("before a refresh: got %v; want nothing", got)
	}
	iv.refresh(t.Context())
	if got := iv.Modules("python"); fmt.Sprint(got) != "[numpy pandas]" {
		t.Errorf("python: got %v; want [numpy pandas]", got)
	}
	if got := iv.Modules("javascript"); got != nil {
		t.Errorf("javascript: got %v; want nothing", got)
	}
}

// TestInventoriesModulesOfNode: a Node.js language's importable names are
// its image's global npm packages, not its Python modules.
func TestInventoriesModulesOfNode(t *testing.T) {
	node := &inventory.Inventory{Node: "20.19.2", Modules: []string{"apt_pkg"}, NPM: []inventory.Package{{Name: "acorn", Version: "8.8.1"}, {Name: "@types/node"}}}
	iv := newInventories(func(ctx context.Context, language string) (*inventory.Inventory, error) { return node, nil }, config.Default().Enabled())
	iv.refresh(t.Context())
	if got := iv.Modules("javascript"); fmt.Sprint(got) != "[acorn @types/node]" {
		t.Errorf("javascript: got %v; want [acorn @types/node]", got)
	}
}
