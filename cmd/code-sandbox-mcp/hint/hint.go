// Package hint reads a failed run's standard error for the two failures
// a program cannot fix by itself in a sandbox: a module the image does not
// hold, and a use of the network the sandbox does not have. For either it
// gives one line a model can act on; for anything else, nothing.
//
// It reads only what an uncaught error leaves: the last line of a Python
// traceback, the last uncaught error Node.js reports, of a run that ended
// with a non-zero exit status of its own (not timed out, killed by a
// signal or for its memory). A program that merely prints the same words,
// or catches the error, gets no hint. It knows nothing of MCP or of how
// the line is shown.
package hint

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/internal/editdist"
)

// BuildCommand is the command an operator adds packages to an image with.
const BuildCommand = "code-sandbox-mcp images build"

// Network is the hint on a name-resolution or connect failure.
const Network = "hint: the sandbox has no network, by design: name resolution and connections to other hosts fail; " +
	"work with data passed in as files instead, or tell the user the program needs a network."

// Refused is the hint on a connection refused: in a sandbox, only its
// own loopback can refuse one, everything else being unreachable.
const Refused = "hint: the connection was refused: the sandbox has no network, and its localhost is its own, where nothing listened on that port; " +
	"a service on the user's machine or elsewhere cannot be reached from it."

// Proxied is the hint on a name-resolution, connect or refused failure
// in a sandbox whose language has a network: its way out is the proxy
// alone, to the allowed hosts (%s).
const Proxied = "hint: the sandbox reaches only %s, and only through its HTTP proxy (HTTP_PROXY and HTTPS_PROXY, which Python's urllib, requests and pip use as they are); " +
	"names do not resolve in the sandbox and direct connections fail: send HTTP or HTTPS requests through the proxy, to those hosts."

// maxSimilar is how many similar modules a hint names at most.
const maxSimilar = 3

// For returns the one-line hint on r, a finished run of language l, or ""
// if there is none. modules are the top-level names a program of l can
// import from its image, which a missing module's hint picks similar ones
// from; nil if not known, when it names none.
func For(r *exec.Result, l config.Language, modules []string) string {
	if r == nil || r.ExitCode == 0 || r.TimedOut || r.OOMKilled || r.Signal != "" {
		return ""
	}
	var f failure
	switch l.Interpreter() {
	case "python":
		f = pythonFailure(string(r.Stderr))
	case "node":
		f = nodeFailure(string(r.Stderr))
	default:
		return ""
	}
	switch {
	case (f.network || f.refused) && l.Network != nil:
		return fmt.Sprintf(Proxied, strings.Join(l.Network.Allow, ", "))
	case f.network:
		return Network
	case f.refused:
		return Refused
	case f.module != "":
		return moduleHint(f.module, l, modules)
	}
	return ""
}

// failure is what an uncaught error says: a module that is not there, a
// failure of the network, or a connection refused; the zero value none.
type failure struct {
	module  string
	network bool
	refused bool
}

// networkFailure is the failure of an error whose message (with its
// causes) is msg: network if it says name resolution failed or a network
// cannot be reached, refused if only that a connection was refused.
func networkFailure(msg string, network, refused *regexp.Regexp) failure {
	switch {
	case network.MatchString(msg):
		return failure{network: true}
	case refused.MatchString(msg):
		return failure{refused: true}
	}
	return failure{}
}

// Python's uncaught exceptions, as the interpreter prints their last line.
var (
	// pyException is an exception's last line: its (qualified) name,
	// then its message.
	pyException = regexp.MustCompile(`^([A-Za-z_][\w.]*): (.*)$`)
	// pyNoModule is an import's failure; Python imports a dotted name's
	// parents first, so the name is the first piece it did not find.
	pyNoModule = regexp.MustCompile(`^No module named '([^']+)'`)
	// pyNetwork are the messages of the errors of getaddrinfo and
	// connect in a sandbox's network namespace, which has a loopback
	// only, as socket, urllib, http.client, urllib3 and requests report
	// them; pyRefused is connect's to a port of that loopback where
	// nothing listens.
	pyNetwork = regexp.MustCompile(`\[Errno -[235]\]|Temporary failure in name resolution|Name or service not known|No address associated with hostname|` +
		`\[Errno (101|113|99)\]|Network is unreachable|No route to host|Cannot assign requested address|NameResolutionError|Failed to resolve`)
	pyRefused = regexp.MustCompile(`\[Errno 111\]|Connection refused`)
)

// pythonFailure reads the uncaught exception that ended a Python program:
// the last non-empty line of stderr, after a traceback's first line.
func pythonFailure(stderr string) failure {
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	last := strings.TrimRight(lines[len(lines)-1], "\r ")
	if !slices.ContainsFunc(lines[:len(lines)-1], func(s string) bool {
		return strings.TrimRight(s, "\r") == "Traceback (most recent call last):"
	}) {
		return failure{}
	}
	m := pyException.FindStringSubmatch(last)
	if m == nil {
		return failure{}
	}
	name, msg := m[1], m[2]
	if name == "ModuleNotFoundError" {
		if mm := pyNoModule.FindStringSubmatch(msg); mm != nil {
			return failure{module: mm[1]}
		}
		return failure{}
	}
	if strings.HasSuffix(name, "Error") || strings.HasSuffix(name, "gaierror") {
		return networkFailure(msg, pyNetwork, pyRefused)
	}
	return failure{}
}

// Node.js's uncaught errors, as it prints them.
var (
	// nodeHeader is an error's first line, at the start of a line:
	// "Error: ...", "TypeError: fetch failed", "Error [CODE]: ..."; a
	// session's driver prefixes "Uncaught ".
	nodeHeader = regexp.MustCompile(`^(Uncaught )?([A-Za-z_$][\w$]*)( \[([A-Z_]+)\])?: (.*)$`)
	// nodeNoModule is require's and import's failure to find a package.
	nodeNoModule = regexp.MustCompile(`^Cannot find (?:module|package) '([^']+)'`)
	// nodeModuleCode is the code of such an error, among its properties.
	nodeModuleCode = regexp.MustCompile(`(?m)^\s+code: '(ERR_)?MODULE_NOT_FOUND'`)
	// nodeNetwork are the codes of getaddrinfo's and connect's errors in
	// a sandbox's network namespace, in the error or its cause;
	// nodeRefused is connect's to a port of its loopback where nothing
	// listens.
	nodeNetwork = regexp.MustCompile(`\b(getaddrinfo (EAI_AGAIN|ENOTFOUND|EAI_NONAME|EAI_FAIL)|connect (ENETUNREACH|EHOSTUNREACH|EADDRNOTAVAIL))\b`)
	nodeRefused = regexp.MustCompile(`\bconnect ECONNREFUSED\b`)
)

// nodeFailure reads the uncaught error that ended a Node.js program: the
// last error whose first line starts a line of stderr, with what follows
// it (its stack, properties and cause are indented).
func nodeFailure(stderr string) failure {
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	start := -1
	var m []string
	for i := len(lines) - 1; i >= 0; i-- {
		if m = nodeHeader.FindStringSubmatch(strings.TrimRight(lines[i], "\r")); m != nil {
			start = i
			break
		}
	}
	if start < 0 {
		return failure{}
	}
	block := strings.Join(lines[start:], "\n")
	uncaught, code, msg := m[1] != "", m[4], m[5]
	if mm := nodeNoModule.FindStringSubmatch(msg); mm != nil {
		// A session's driver shows an error's stack alone, without its
		// properties; a program's own run shows its code.
		if code == "ERR_MODULE_NOT_FOUND" || nodeModuleCode.MatchString(block) || (uncaught && strings.Contains(block, "\nRequire stack:")) {
			if pkg := nodePackage(mm[1]); pkg != "" {
				return failure{module: pkg}
			}
		}
		return failure{}
	}
	// A session's driver shows fetch's error without its cause, and
	// fetch fails so on the network only.
	if m[2] == "TypeError" && msg == "fetch failed" && uncaught && !strings.Contains(block, "[cause]:") {
		return failure{network: true}
	}
	return networkFailure(block, nodeNetwork, nodeRefused)
}

// nodePackage is the package a specifier names: "@scope/name" or "name"
// without a path within it; "" for a path, which names the program's own
// files, and for a built-in.
func nodePackage(spec string) string {
	if spec == "" || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, "node:") || strings.HasPrefix(spec, "file:") {
		return ""
	}
	parts := strings.Split(spec, "/")
	if strings.HasPrefix(spec, "@") {
		if len(parts) < 2 {
			return ""
		}
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// pipNames are the pip packages of modules whose package is named
// otherwise, the common ones.
var pipNames = map[string]string{
	"PIL":      "pillow",
	"bs4":      "beautifulsoup4",
	"cv2":      "opencv-python-headless",
	"dateutil": "python-dateutil",
	"docx":     "python-docx",
	"dotenv":   "python-dotenv",
	"jwt":      "PyJWT",
	"skimage":  "scikit-image",
	"sklearn":  "scikit-learn",
	"yaml":     "PyYAML",
}

// moduleHint is the hint on a module that is not in l's image; modules
// are what is (nil if not known).
func moduleHint(module string, l config.Language, modules []string) string {
	if slices.Contains(modules, module) {
		// The image holds it, so it failed for another reason.
		return ""
	}
	s := fmt.Sprintf("hint: the module '%s' is not in this sandbox's image, and with no network it cannot be installed at run time", module)
	if l.Network != nil {
		s = fmt.Sprintf("hint: the module '%s' is not in this sandbox's image", module)
	}
	if similar := Similar(module, modules); len(similar) > 0 {
		s += "; similar modules there: " + strings.Join(similar, ", ")
	}
	switch {
	case l.Interpreter() == "node":
		return s + fmt.Sprintf(". If the program needs it, tell the user an operator can add it: `%s --from %s --npm %s`.", BuildCommand, l.Name, module)
	case l.Interpreter() != "python":
		return s + ". If the program needs it, tell the user an operator can add it to the image."
	case strings.Contains(module, "."):
		return s + fmt.Sprintf(". If the program needs it, tell the user an operator can add the package that provides it: `%s --from %s --pip PACKAGE`.", BuildCommand, l.Name)
	default:
		return s + fmt.Sprintf(". If the program needs it, tell the user an operator can add it: `%s --from %s --pip %s`.", BuildCommand, l.Name, cmp.Or(pipNames[module], module))
	}
}

// Similar returns up to three of modules that name looks like a misspelling
// or a part of, best first: by edit distance, ignoring case, at most 1 for
// a name of up to 4 letters and 2 for a longer one, then those that start
// with name or it with them, then those that contain it or it them (either
// at least 3 letters long). Names that start with "_" are left out.
func Similar(name string, modules []string) []string {
	type match struct {
		name string
		rank int
	}
	lower := strings.ToLower(name)
	maxDist := 2
	if len(lower) <= 4 {
		maxDist = 1
	}
	var found []match
	for _, m := range modules {
		if m == name || m == "" || strings.HasPrefix(m, "_") {
			continue
		}
		lm := strings.ToLower(m)
		short := min(len(lm), len(lower))
		switch d := editdist.Distance(lower, lm); {
		case d <= maxDist:
			found = append(found, match{m, d})
		case short >= 3 && (strings.HasPrefix(lm, lower) || strings.HasPrefix(lower, lm)):
			found = append(found, match{m, maxDist + 1})
		case short >= 3 && (strings.Contains(lm, lower) || strings.Contains(lower, lm)):
			found = append(found, match{m, maxDist + 2})
		}
	}
	slices.SortFunc(found, func(a, b match) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(len(a.name), len(b.name)), strings.Compare(a.name, b.name))
	})
	var names []string
	for _, m := range found {
		if !slices.Contains(names, m.name) {
			names = append(names, m.name)
		}
		if len(names) == maxSimilar {
			break
		}
	}
	return names
}
