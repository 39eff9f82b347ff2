package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
)

const tokenUsage = `usage:
  token new NAME [--append FILE]
                          make a client's token for --auth-tokens: print the token once on stdout
                          and its line for the file, NAME SHA256HEX, on stderr;
                          --append FILE: add the line to FILE instead (created 0600, and its directory 0700)
`

// tokenCommand runs the token verbs and returns the exit status: for new,
// 0 with the token on stdout and nothing else there, 1 if FILE refused the
// line (a name already in it, a file others may write), 2 for usage
// errors. The token is printed only once its line is safely in FILE.
func tokenCommand(args []string, stdout, stderr io.Writer) int {
	fs, args, status, ok := oneVerb("token", "new", args, tokenUsage, stdout, stderr)
	if !ok {
		return status
	}
	var file string
	fs.StringVar(&file, "append", "", "add the line to the token `file`, created 0600 (its directory 0700) if missing")
	// NAME may come before or after --append.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(names) != 1 {
		fmt.Fprint(stderr, tokenUsage)
		fmt.Fprintf(stderr, "code-sandbox-mcp token new: want one NAME, got %d\n", len(names))
		return exitUsage
	}
	name := names[0]
	if err := httpauth.CheckName(name); err != nil {
		fmt.Fprintf(stderr, "code-sandbox-mcp token new: %v\n", err)
		return exitUsage
	}
	token := httpauth.NewToken()
	if file == "" {
		fmt.Fprintln(stderr, httpauth.Line(name, token))
	} else {
		if err := httpauth.Append(file, name, token); err != nil {
			fmt.Fprintf(stderr, "code-sandbox-mcp token new: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stderr, "code-sandbox-mcp: added %s to %s; its token, on stdout, is shown only now\n", name, file)
	}
	fmt.Fprintln(stdout, token)
	return exitOK
}
