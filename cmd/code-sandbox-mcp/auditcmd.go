package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/audit"
)

const auditUsage = `usage:
  audit verify [--after HASH] FILE...
                          check the hash chain of an audit log, its rotated files oldest first,
                          and print the hash of its last record (keep it elsewhere);
                          --after HASH: the first FILE continues a chain whose last record hashed to HASH
`

// auditCommand runs the audit verbs and returns the exit status: for
// verify, 0 and a summary on stdout, ending in the last record's hash,
// if the chain is intact, 1 and
// "FILE:LINE: why" on stderr if it is broken (or a file cannot be read),
// 2 for usage errors.
func auditCommand(args []string, stdout, stderr io.Writer) int {
	fs, args, status, ok := oneVerb("audit", "verify", args, auditUsage, stdout, stderr)
	if !ok {
		return status
	}
	var after string
	fs.Func("after", "the `hash` of the record before the first FILE's first", func(s string) error {
		if _, err := hex.DecodeString(s); err != nil || len(s) != 64 || s != strings.ToLower(s) {
			return errors.New("want a record's hash: 64 lowercase hex digits")
		}
		after = s
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, auditUsage)
		fmt.Fprintln(stderr, "code-sandbox-mcp audit verify: no FILE given")
		return exitUsage
	}
	sum, err := audit.VerifyAfter(after, fs.Args()...)
	var broken *audit.BrokenError
	switch {
	case errors.As(err, &broken):
		fmt.Fprintln(stderr, broken)
		return exitFailure
	case err != nil:
		fmt.Fprintf(stderr, "code-sandbox-mcp audit verify: %v\n", err)
		return exitFailure
	case sum.Chain == "":
		fmt.Fprintf(stdout, "%d records, continuing %s, intact; last %s\n", sum.Records, after, sum.Last)
	default:
		fmt.Fprintf(stdout, "%d records, chain %s, intact; last %s\n", sum.Records, sum.Chain, sum.Last)
	}
	return exitOK
}
