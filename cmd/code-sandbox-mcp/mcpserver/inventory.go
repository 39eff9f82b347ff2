package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/hint"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/inventory"
)

// InventoryFunc tells what language's image holds, waiting as long as
// ctx allows; (*exec.Executor).Inventory is one. An error means it is
// not known (the image is missing, still being prepared, or could not be
// read), and nothing is said of the image's packages.
type InventoryFunc func(ctx context.Context, language string) (*inventory.Inventory, error)

// inventoryWait bounds how long tools/list and the environments resource
// wait for what the images hold: at a server's start the images are
// being prepared, and a client lists the tools once, so the wait is worth
// a moment, but not a pull's minutes.
const inventoryWait = 5 * time.Second

// notableShown is how many packages a tool's description names.
const notableShown = 12

// inventories keeps what each language's image holds, as last asked.
type inventories struct {
	read   InventoryFunc     // nil: nothing is known
	names  []string          // the languages'
	interp map[string]string // each language's interpreter (config.Language.Interpreter)

	mu    sync.Mutex
	known map[string]*inventory.Inventory // by language; nil if not known
}

func newInventories(read InventoryFunc, langs []config.Language) *inventories {
	iv := &inventories{read: read, known: map[string]*inventory.Inventory{}, interp: map[string]string{}}
	for _, l := range langs {
		iv.names = append(iv.names, l.Name)
		iv.interp[l.Name] = l.Interpreter()
	}
	return iv
}

// refresh asks for every language's inventory, side by side, waiting at
// most inventoryWait. A language whose inventory is not known then is
// said nothing of, rather than something that may have stopped being
// true (its image changed, or went).
func (iv *inventories) refresh(ctx context.Context) {
	if iv.read == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, inventoryWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, name := range iv.names {
		wg.Go(func() {
			inv, err := iv.read(ctx, name)
			if err != nil {
				inv = nil
			}
			iv.mu.Lock()
			iv.known[name] = inv
			iv.mu.Unlock()
		})
	}
	wg.Wait()
}

// get returns language's inventory as last asked; nil if not known.
func (iv *inventories) get(language string) *inventory.Inventory {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	return iv.known[language]
}

// Modules returns the names a program of language can import from its
// image, as last read for tools/list or the environments resource: for
// Node.js its global npm packages, else its Python distributions'
// modules (inventory.Inventory.Modules); nil if not known. It is for the
// advice a result gives on a missing module (Options.Modules), and must
// not wait: it never asks.
func (iv *inventories) Modules(language string) []string {
	inv := iv.get(language)
	switch {
	case inv == nil:
		return nil
	case iv.interp[language] == "node":
		names := make([]string, 0, len(inv.NPM))
		for _, p := range inv.NPM {
			names = append(names, p.Name)
		}
		return names
	}
	return inv.Modules
}

// imageSentence says what the image of l holds, as inv tells it (nil:
// nothing of its packages), and how packages get there.
func imageSentence(l config.Language, sb sandbox, inv *inventory.Inventory) string {
	var parts []string
	if inv != nil {
		interp := l.Interpreter()
		switch {
		case interp == "python" && inv.Python != "":
			parts = append(parts, "Python "+inv.Python+".")
		case interp == "node" && inv.Node != "":
			parts = append(parts, "Node.js "+inv.Node+".")
		}
		switch {
		case len(inv.Notable) > 0:
			parts = append(parts, "Packages in the image: "+packageList(inv.Notable, notableShown)+".")
		case interp == "python" && len(inv.Pip) == 0:
			parts = append(parts, "The image has no Python packages beyond the standard library.")
		case interp == "node" && len(inv.NPM) == 0:
			parts = append(parts, "The image has no npm packages: require() Node.js's built-in modules only.")
		}
	}
	var why []string
	if !sb.Network {
		why = append(why, "no network")
	}
	if sb.ReadOnlyRoot {
		why = append(why, "read-only image")
	}
	if !sb.Network {
		parts = append(parts, fmt.Sprintf("Nothing can be installed at run time (%s); the operator adds packages with `%s`.", strings.Join(why, ", "), hint.BuildCommand))
	} else {
		if l.Interpreter() == "python" && len(sb.Allow) > 0 && inv != nil && slices.ContainsFunc(inv.Pip, func(p inventory.Package) bool { return p.Name == "pip" }) {
			parts = append(parts, "`pip install` works through the proxy from an allowed index; packages go to the user site under HOME and last as long as the sandbox (a session's lifetime).")
		}
		parts = append(parts, fmt.Sprintf("The operator adds packages to the image with `%s`.", hint.BuildCommand))
	}
	return strings.Join(parts, " ")
}

// packageList names the first n of ps, and says how many more there
// are and where they are all listed.
func packageList(ps []inventory.Package, n int) string {
	names := make([]string, 0, min(n, len(ps)))
	for _, p := range ps[:min(n, len(ps))] {
		names = append(names, p.String())
	}
	s := strings.Join(names, ", ")
	if more := len(ps) - len(names); more > 0 {
		s += fmt.Sprintf(" and %d more (all in %s)", more, environmentsURI)
	}
	return s
}

// toolText composes the description of a language's tool from what
// its image holds (nil: not known).
type toolText struct {
	language string
	text     func(*inventory.Inventory) string
}

// describeTools is a tool filter: it gives each language's tool in texts
// (by tool name) the description of what its image holds, as last known.
// It never waits, for mcp-go applies it to every call too; the hook of
// tools/list refreshes first.
func (iv *inventories) describeTools(texts map[string]toolText) func(context.Context, []mcp.Tool) []mcp.Tool {
	return func(_ context.Context, tools []mcp.Tool) []mcp.Tool {
		for i, t := range tools {
			if d, ok := texts[t.Name]; ok {
				tools[i].Description = d.text(iv.get(d.language))
			}
		}
		return tools
	}
}
