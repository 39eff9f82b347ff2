package app

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/internal/logtest"
)

func TestNotificationSecrets(t *testing.T) {
	cfg := config.Default()
	cfg.Sandbox.PassThroughEnv = []string{"LONG", "SHORT", "UNSET", "EMPTY"}
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"LONG": "a-long-value", "SHORT": "abc", "EMPTY": ""}[name]
		return v, ok
	}
	var log logtest.Buffer
	got := notificationSecrets(cfg, env, slog.New(slog.NewTextHandler(&log, nil)))
	if want := []mcpserver.Secret{{Name: "LONG", Value: "a-long-value"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("secrets %+v; want %+v", got, want)
	}
	if !strings.Contains(log.String(), "SHORT") {
		t.Errorf("no warning names the value too short to redact: %q", log.String())
	}
}
