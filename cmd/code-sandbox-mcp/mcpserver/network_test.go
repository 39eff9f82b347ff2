package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// A result lists its connections only for a language with a network, and
// its text names the refused ones, a few at most.
func TestNetworkInResult(t *testing.T) {
	l, _ := config.Default().Language("python")
	lim := l.Limits
	for _, tc := range []struct {
		name     string
		recs     []exec.NetworkRecord
		rest     []exec.NetworkTally
		inJSON   string // in the structured content; "" for no network key
		inText   string
		notInTxt string
	}{
		{name: "no network", recs: nil, notInTxt: "[network"},
		{name: "no connection", recs: []exec.NetworkRecord{}, inJSON: `"network":[]`, notInTxt: "[network"},
		{name: "allowed", recs: []exec.NetworkRecord{{Host: "api.example.com", Port: 443, Method: "CONNECT", Allowed: true, BytesUp: 10, BytesDown: 20}},
			inJSON: `"network":[{"host":"api.example.com","port":443,"method":"CONNECT","allowed":true,"bytes_up":10,"bytes_down":20,"duration_ms":0}]`, notInTxt: "[network"},
		{name: "refused", recs: []exec.NetworkRecord{
			{Host: "a.example", Port: 80, Method: "GET", Reason: "a.example is not on the allow list"},
			{Host: "b.example", Port: 80, Method: "GET", Reason: "r"},
			{Host: "c.example", Port: 80, Method: "GET", Reason: "r"},
			{Host: "d.example", Port: 80, Method: "GET", Reason: "r"},
			{Host: "ok.example", Port: 80, Method: "GET", Allowed: true, Secret: "Authorization"},
		}, inJSON: `"secret_header":"Authorization"`,
			inText: "[network: the sandbox's proxy refused a.example:80 (a.example is not on the allow list); b.example:80 (r); c.example:80 (r) and 1 more]"},
		{name: "tallied", recs: []exec.NetworkRecord{{Host: "a.example", Port: 80, Method: "GET", Reason: "r"}},
			rest: []exec.NetworkTally{
				{Host: "ok.example", Allowed: true, Connections: 7, BytesUp: 70, BytesDown: 700},
				{Host: "", Connections: 5000, Reason: "over the limit of 1000 connections in one run (max_connections_per_run)"},
				{Host: "b.example", Connections: 2, Reason: "r"},
				{Host: "c.example", Connections: 3, Reason: "r"},
			},
			inJSON: `"network_rest":[{"host":"ok.example","allowed":true,"connections":7,"bytes_up":70,"bytes_down":700},{"host":"","allowed":false,"connections":5000,"bytes_up":0,"bytes_down":0,"reason":"over the limit of 1000 connections in one run (max_connections_per_run)"}`,
			inText: "[network: the sandbox's proxy refused a.example:80 (r); a connection whose request it did not read 5000 times (over the limit of 1000 connections in one run (max_connections_per_run)); b.example 2 times (r) and 3 more]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &exec.Result{Language: "python", Stdout: []byte("hi\n"), Network: tc.recs, NetworkRest: tc.rest}
			res := toolResult(r, lim, retention{}, "")
			data, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			if tc.inJSON == "" && strings.Contains(string(data), `"network"`) {
				t.Errorf("structured content %s has a network key", data)
			}
			if tc.inJSON != "" && !strings.Contains(string(data), tc.inJSON) {
				t.Errorf("structured content %s lacks %s", data, tc.inJSON)
			}
			text := resultText(r, lim, "", "")
			if tc.inText != "" && !strings.Contains(text, tc.inText) {
				t.Errorf("text %q lacks %q", text, tc.inText)
			}
			if tc.notInTxt != "" && strings.Contains(text, tc.notInTxt) {
				t.Errorf("text %q has %q", text, tc.notInTxt)
			}
		})
	}
}
