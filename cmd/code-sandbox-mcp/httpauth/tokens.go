// Package httpauth decides who may call the HTTP server: bearer tokens
// checked against a file of their SHA-256 hashes, the principal (the
// token's name) carried in the request's context, the Origin check that
// keeps a browser page from reaching a local server by DNS rebinding, and
// the rule for which listen addresses are loopback.
//
// It knows nothing of MCP, containerd, the configuration or the command
// line; the server wires these pieces together.
package httpauth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// TokenPrefix starts every token NewToken makes, so that a leaked one is
// recognisable (by a secret scanner, say) as a token of this server.
const TokenPrefix = "csm_"

// maxNameLen is the longest name a client may have.
const maxNameLen = 64

// Tokens are the clients of a token file: a name and the SHA-256 of its
// token each. It holds no token.
type Tokens struct {
	entries []entry
}

type entry struct {
	name string
	sum  [sha256.Size]byte
}

// Load reads the token file at path: one client a line, "NAME SHA256HEX",
// where SHA256HEX is the lowercase hex SHA-256 of the client's token;
// blank lines and lines starting with # are ignored. Names are 1 to 64 of
// A-Z a-z 0-9 . _ - and unique, and so are the hashes. The file is refused
// if group or others may write it (anyone who can add a line can let
// themselves in), if any line is malformed (the error names the line), or
// if it holds no client (no token would be accepted).
func Load(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth tokens: %w", err)
	}
	defer f.Close()
	if err := checkFile(f); err != nil {
		return nil, err
	}
	entries, err := parse(f)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("auth tokens %s holds no client, so no token would be accepted; add one with: code-sandbox-mcp token new NAME --append %s", path, path)
	}
	return &Tokens{entries: entries}, nil
}

// checkFile refuses f unless it is a regular file that neither group nor
// others may write. It looks at the open file, so the file checked is
// the file read.
func checkFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("auth tokens: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("auth tokens %s is not a regular file", f.Name())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("auth tokens %s is writable by group or others (mode %04o), so anyone who can write it can let themselves in; run: chmod go-w %s", f.Name(), perm, f.Name())
	}
	return nil
}

// parse reads the lines of the token file f. Its errors are
// "FILE:LINE: why".
func parse(f *os.File) ([]entry, error) {
	var entries []entry
	names := map[string]int{}
	sums := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want NAME SHA256HEX, got %d fields", f.Name(), n, len(fields))
		}
		name, hexSum := fields[0], fields[1]
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", f.Name(), n, err)
		}
		sum, err := parseSum(hexSum)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", f.Name(), n, err)
		}
		if prev, ok := names[name]; ok {
			return nil, fmt.Errorf("%s:%d: name %s is already on line %d; names must be unique", f.Name(), n, name, prev)
		}
		if prev, ok := sums[sum]; ok {
			return nil, fmt.Errorf("%s:%d: the hash is already on line %d; each client needs its own token", f.Name(), n, prev)
		}
		names[name], sums[sum] = n, n
		entries = append(entries, entry{name: name, sum: sum})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth tokens %s: %w", f.Name(), err)
	}
	return entries, nil
}

// CheckName reports whether name may name a client: 1 to 64 of A-Z a-z
// 0-9 . _ -.
func CheckName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("name %q: want 1 to %d characters", name, maxNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("name %q: want only A-Z a-z 0-9 . _ -", name)
		}
	}
	return nil
}

// parseSum decodes a SHA-256 written as 64 lowercase hex digits.
func parseSum(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if len(s) != hex.EncodedLen(sha256.Size) || s != strings.ToLower(s) {
		return sum, fmt.Errorf("hash %q: want the SHA-256 of the token as 64 lowercase hex digits", s)
	}
	if _, err := hex.Decode(sum[:], []byte(s)); err != nil {
		return sum, fmt.Errorf("hash %q: want the SHA-256 of the token as 64 lowercase hex digits", s)
	}
	return sum, nil
}

// Lookup returns the name of the client whose token this is. It hashes
// token and compares the hash with every client's in constant time, all
// of them whatever matched, so that how long it takes says neither which
// names exist nor how much of a token was right. An empty token matches
// no client.
func (t *Tokens) Lookup(token string) (name string, ok bool) {
	if t == nil || token == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, e := range t.entries {
		match := subtle.ConstantTimeCompare(sum[:], e.sum[:])
		found = subtle.ConstantTimeSelect(match, i, found)
	}
	if found < 0 {
		return "", false
	}
	return t.entries[found].name, true
}

// Len is the number of clients.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// NewToken returns a new random token: TokenPrefix and 32 bytes from
// crypto/rand in unpadded base64url.
func NewToken() string {
	// crypto/rand.Read never fails; it crashes the program instead.
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// Line is the token file's line for the client name with token, without
// its newline: the name and the lowercase hex SHA-256 of the token.
func Line(name, token string) string {
	sum := sha256.Sum256([]byte(token))
	return name + " " + hex.EncodeToString(sum[:])
}

// errNameTaken is the error of Append when the file already has a client
// of that name.
var errNameTaken = errors.New("name already in the token file")

// Append adds the line of the client name with token to the token file at
// path, creating the file with mode 0600 if it does not exist (and its
// directory, mode 0700, if that does not), and syncs it. It refuses,
// changing nothing, a file that Load would refuse for its
// mode or a malformed line, and a name (errNameTaken) or token the file
// already has. Appends from two processes at once are not serialised.
func Append(path, name, token string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if token == "" {
		return errors.New("empty token")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth tokens: cannot create the token file's directory: %w; create it (`install -d -m 0700 %s`) as a user who may, or put the file elsewhere", err, dir)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("auth tokens: %w", err)
	}
	defer f.Close()
	if err := checkFile(f); err != nil {
		return err
	}
	entries, err := parse(f)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(token))
	for _, e := range entries {
		if e.name == name {
			return fmt.Errorf("%s: %s: %w; pick another name, or remove its line to replace its token", path, name, errNameTaken)
		}
		if e.sum == sum {
			return fmt.Errorf("%s: the token is already in the file", path)
		}
	}
	line := Line(name, token) + "\n"
	if newline, err := endsInNewline(f); err != nil {
		return fmt.Errorf("auth tokens: %w", err)
	} else if !newline {
		line = "\n" + line
	}
	if _, err := io.WriteString(f, line); err != nil {
		return fmt.Errorf("auth tokens: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("auth tokens: %w", err)
	}
	return f.Close()
}

// endsInNewline reports whether f is empty or its last byte is a newline.
func endsInNewline(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() == 0 {
		return true, nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return bytes.Equal(last, []byte("\n")), nil
}
