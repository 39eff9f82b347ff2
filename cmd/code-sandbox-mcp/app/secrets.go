package app

import (
	"log/slog"
	"slices"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/config"
)

// redactedEnv names the variables whose values the audit log and the
// notifications keep out: the pass-through variables, which every
// sandbox holds, and those of the network secrets, which no sandbox holds
// but an upstream that reflects its request could hand to one.
func redactedEnv(cfg *config.Config) []string {
	names := slices.Clone(cfg.Sandbox.PassThroughEnv)
	for _, n := range cfg.SecretEnv() {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// notificationSecrets are the values of redactedEnv that env sets, which
// no notification of a run's output may carry: those the audit log
// redacts (minRedactBytes or more), for the same reason. It warns of the
// values too short for it. A nil env sets none.
func notificationSecrets(cfg *config.Config, env lookupFunc, logger *slog.Logger) []mcpserver.Secret {
	if env == nil {
		return nil
	}
	var secrets []mcpserver.Secret
	var tooShort []string
	for _, name := range redactedEnv(cfg) {
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
