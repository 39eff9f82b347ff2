package app

import (
	"log/slog"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/config"
)

// notificationSecrets are the pass-through values of cfg that env sets,
// which no notification of a run's output may carry: those the audit log
// redacts (minRedactBytes or more), for the same reason. It warns of the
// values too short for it. A nil env sets none.
func notificationSecrets(cfg *config.Config, env lookupFunc, logger *slog.Logger) []mcpserver.Secret {
	if env == nil {
		return nil
	}
	var secrets []mcpserver.Secret
	var tooShort []string
	for _, name := range cfg.Sandbox.PassThroughEnv {
		v, ok := env(name)
		switch {
		case !ok || v == "":
		case len(v) < minRedactBytes:
			tooShort = append(tooShort, name)
		default:
			secrets = append(secrets, mcpserver.Secret{Name: name, Value: v})
		}
	}
	if len(tooShort) > 0 {
		logger.Warn("pass-through values too short to redact from the notifications that stream a run's output: a program that prints them streams them",
			"pass_through_env", tooShort, "min_bytes", minRedactBytes)
	}
	return secrets
}
