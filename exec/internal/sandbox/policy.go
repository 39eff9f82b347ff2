package sandbox

import (
	"code-sandbox-mcp/config"
	sandboxoci "code-sandbox-mcp/oci"
)

// runFacts are what only a run knows of its sandbox's policy.
type runFacts struct {
	imageEnv, passEnv []string
	hard              map[string]uint64 // the server's hard rlimits; nil: none
	initPath          string            // the host path of the init; "" runs the command as pid 1
	uid               uint32
	codeDir           string // host directories: the program's, the workspace
	workspaceDir      string
	// netns stands for a run's network namespace in a description,
	// where no run made one (a run's is set by withNetwork).
	netns bool
}

// basePolicy is the policy of every sandbox of lang with f's facts: the
// one place a sandbox's policy is made, for a run (createContainer adds
// its hooks, driver and start) and for its description (Described).
func basePolicy(lang config.Language, f runFacts) sandboxoci.Policy {
	p := sandboxoci.NewPolicy(lang)
	p.Env = sandboxoci.Env(f.imageEnv, lang.Env, f.passEnv)
	if f.hard != nil {
		p.Hard = func(t string) (uint64, bool) { v, ok := f.hard[t]; return v, ok }
	}
	p.CodeHostDir, p.WorkspaceHostDir = f.codeDir, f.workspaceDir
	p.InitHostPath = f.initPath
	p.UID, p.GID = f.uid, f.uid
	if f.netns {
		p.Netns = "/netns-of-each-run"
	}
	return p
}

// Described is the policy every sandbox of lang gets minus what only a
// run knows (its program's directory, the pass-through variables, the
// image's environment, the server's hard rlimits, its hooks and how it
// starts), for telling a model what its sandbox is: generated and read
// back, it says what a run's spec enforces.
func Described(lang config.Language) sandboxoci.Policy {
	return basePolicy(lang, runFacts{
		// Each run has a uid of its own; nothing said of the sandbox
		// depends on which.
		uid: 1,
		// The workspace is a tmpfs mounted on the host, sized by
		// workspace_size; any host directory stands for it in the spec.
		workspaceDir: "/workspace-of-each-run",
		// Every sandbox has the server's init; any host path stands for it.
		initPath: "/init-of-the-server",
		// Each run with a network joins a namespace of its own.
		netns: lang.Network != nil,
	})
}
