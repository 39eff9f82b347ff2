package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// SetRedact makes the log pass every string of the fields of each record
// written after it through f, keys and values at any depth, and write
// what f returns; the values of the fields named in keep (hashes, say,
// which f could only corrupt) are written as they are, and so are the
// header's time, event and prev. One call where the log is opened so
// keeps a secret out of every record, however its fields are built. A
// nil f writes every string as it is.
func (l *Log) SetRedact(f func(string) string, keep ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.redact = f
	l.keep = map[string]bool{}
	for _, k := range keep {
		l.keep[k] = true
	}
}

// frame is an object or array being rewritten by mapStrings.
type frame struct {
	object bool
	n      int  // members or elements written so far
	value  bool // in an object: a key is written, its value is next
	keep   bool // that key is one of keep
}

// mapStrings rewrites the JSON text body with each string s replaced by
// f(s), but for the values of the keys in keep; everything else keeps its
// order and value. It re-encodes strings as encoding/json does.
func mapStrings(body []byte, f func(string) string, keep map[string]bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var out bytes.Buffer
	var stack []*frame
	// sep writes what goes before a value or a key: a comma after a
	// sibling. It reports whether the value is a kept field's.
	sep := func() bool {
		if len(stack) == 0 {
			return false
		}
		top := stack[len(stack)-1]
		if top.object && top.value {
			top.value = false
			top.n++
			return top.keep
		}
		if top.n > 0 {
			out.WriteByte(',')
		}
		if !top.object {
			top.n++
		}
		return false
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				sep()
				stack = append(stack, &frame{object: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			out.WriteByte(byte(v))
			continue
		case string:
			if top := len(stack) - 1; top >= 0 && stack[top].object && !stack[top].value {
				// A key.
				sep()
				stack[top].value, stack[top].keep = true, keep[v]
				writeString(&out, f(v))
				out.WriteByte(':')
				continue
			}
			if sep() {
				writeString(&out, v)
			} else {
				writeString(&out, f(v))
			}
		case json.Number:
			sep()
			out.WriteString(v.String())
		case bool:
			sep()
			fmt.Fprint(&out, v)
		case nil:
			sep()
			out.WriteString("null")
		}
	}
	return out.Bytes(), nil
}

// writeString writes s as a JSON string, as json.Marshal would.
func writeString(out *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	out.Write(b)
}
