// Command lanes lists the integration suite's top-level tests for
// scripts/integration, which deals them to its lanes, read from the
// suite's source (the *_test.go files of DIR, default ./integration):
//
//	go run ./integration/lanes [-dir DIR] all    every top-level test
//	go run ./integration/lanes [-dir DIR] both   those that run against
//	                                             containerd 1.6 too
//
// A test runs against both daemons when the first statement of its body
// is a call of onBothDaemons, or when a statement of its body (not one
// nested in another) is a call of eachMode, the isolation suite's
// (integration/main_test.go says why). A test that calls either anywhere
// else would run against 2.x alone, its marker unseen: lanes refuses the
// source then, naming the test, and exits 1, as it does when no test is
// marked at all.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// markers are the calls that make a test run against both daemons, each
// with whether it must be its test's first statement (else any of its
// body's own statements).
var markers = map[string]bool{"onBothDaemons": true, "eachMode": false}

func main() {
	dir := flag.String("dir", "integration", "the directory of the suite's *_test.go files")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: lanes [-dir DIR] all|both\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || (flag.Arg(0) != "all" && flag.Arg(0) != "both") {
		flag.Usage()
		os.Exit(2)
	}
	tests, err := read(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lanes: %v\n", err)
		os.Exit(1)
	}
	for _, t := range tests {
		if flag.Arg(0) == "all" || t.both {
			fmt.Println(t.name)
		}
	}
}

// test is one top-level test of the suite.
type test struct {
	name string
	both bool // its first statement is a marker's call
}

// read parses the *_test.go files of dir and returns their top-level
// tests in file and source order. It fails if a test calls a marker other
// than as its first statement, or if no test is marked.
func read(dir string) ([]test, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *_test.go files in %s", dir)
	}
	var (
		tests    []test
		problems []string
		fset     = token.NewFileSet()
	)
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !isTest(fn) {
				continue
			}
			t := test{name: fn.Name.Name}
			for i, stmt := range fn.Body.List {
				ast.Inspect(stmt, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					id, ok := call.Fun.(*ast.Ident)
					if !ok {
						return true
					}
					first, ok := markers[id.Name]
					if !ok {
						return true
					}
					es, ok := stmt.(*ast.ExprStmt)
					switch {
					case ok && n == es.X && (i == 0 || !first):
						t.both = true
					case first:
						problems = append(problems, fmt.Sprintf("%s: %s calls %s, but not as its first statement: it would run against containerd 2.x alone", fset.Position(call.Pos()), t.name, id.Name))
					default:
						problems = append(problems, fmt.Sprintf("%s: %s calls %s, but not as a statement of its body: it would run against containerd 2.x alone", fset.Position(call.Pos()), t.name, id.Name))
					}
					return true
				})
			}
			tests = append(tests, t)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	if !slices.ContainsFunc(tests, func(t test) bool { return t.both }) {
		return nil, fmt.Errorf("no test in %s calls onBothDaemons or eachMode as the rule says: the lanes' rule reads nothing", dir)
	}
	return tests, nil
}

// isTest reports whether fn is a top-level test: func TestX(t *testing.T).
func isTest(fn *ast.FuncDecl) bool {
	if fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
		return false
	}
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}
