// Package mcpserver is the MCP face of code-sandbox-mcp: it builds the
// server that offers one tool per language and the environments resource,
// validates a call's arguments, hands the program to a RunFunc and turns
// what came back into a result a model can read and act on. What it says
// about a sandbox (network, writable paths, memory, CPUs, processes) is
// read back from the OCI spec package oci generates for the language. It
// must not know containerd, flags or a transport: it never talks to
// containerd (runs go through the RunFunc it is given, and the commands
// its advice names come in Options), and a caller serves the server New
// returns over stdio, or over another transport by calling New again.
package mcpserver

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// EnvironmentsURI is the resource that lists the configured languages.
const EnvironmentsURI = "sandbox://environments"

// serverName is the name the server gives at initialize.
const serverName = "code-sandbox-mcp"

// RunFunc runs one program; (*exec.Executor).Run is one.
type RunFunc func(ctx context.Context, req exec.Request) (*exec.Result, error)

// Options are what the server says about itself, and the commands its
// advice names, which only its caller knows.
type Options struct {
	// Version is reported at initialize and in the environments resource.
	Version string
	// ImportHint is the command that imports a missing image, such as
	// "code-sandbox-mcp --namespace code-sandbox images import FILE"; a
	// result reporting a missing image tells the model to ask the user
	// to run it.
	ImportHint string
	// DoctorHint is the command that diagnoses the server's set-up, such
	// as "code-sandbox-mcp --namespace code-sandbox doctor"; a result
	// reporting a set-up problem names it.
	DoctorHint string
}

// New builds the MCP server: one tool per language in langs, each running
// its programs through run, and the environments resource. What both say
// about a language's sandbox is read from the OCI spec its limits
// generate; an error means a language's spec cannot be generated. opts
// are applied after the server's own options, so a caller can override
// them. A session's requests other than initialize and ping are refused
// until its initialize has succeeded (see handshake); hooks a caller
// passes in opts are kept, and that check is added to them.
func New(ctx context.Context, o Options, langs []config.Language, run RunFunc, opts ...server.ServerOption) (*server.MCPServer, error) {
	sandboxes := make([]sandbox, len(langs))
	for i, l := range langs {
		sb, err := describeSandbox(ctx, l)
		if err != nil {
			return nil, err
		}
		sandboxes[i] = sb
	}
	opts = append([]server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithRecovery(),
		server.WithOutputSchemaValidation(),
		server.WithInstructions(instructions(sandboxes)),
	}, opts...)
	s := server.NewMCPServer(serverName, o.Version, opts...)
	hooks := s.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(s)
	}
	new(handshake).addTo(hooks)
	for i, l := range langs {
		s.AddTool(newTool(l, sandboxes[i]), toolHandler(l.Name, l.Limits, run, o))
	}
	s.AddResource(
		mcp.NewResource(EnvironmentsURI, "environments",
			mcp.WithResourceDescription("The languages this server runs: tool, image, command and limits of each."),
			mcp.WithMIMEType("application/json"),
		),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			data, err := json.MarshalIndent(environments(o, langs, sandboxes), "", "  ")
			if err != nil {
				return nil, err
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{
				URI: EnvironmentsURI, MIMEType: "application/json", Text: string(data),
			}}, nil
		},
	)
	return s, nil
}

// instructions tells a model what the server is for; "network-less" only
// if no language's spec gives a network.
func instructions(sandboxes []sandbox) string {
	kind := "fresh, isolated"
	if !slices.ContainsFunc(sandboxes, func(sb sandbox) bool { return sb.Network }) {
		kind += ", network-less"
	}
	return "Runs code in " + kind + " sandboxes: one tool per language. " +
		"Print the results you need; each call starts from scratch. " +
		"The resource " + EnvironmentsURI + " lists the languages, images and limits."
}

// environment is one language in the environments resource.
type environment struct {
	Tool        string       `json:"tool"`
	Image       string       `json:"image"`
	Command     []string     `json:"command"`
	File        string       `json:"file"`
	Description string       `json:"description"`
	Limits      limitsOutput `json:"limits"`
}

// limitsOutput is what every run of a language gets. Network, the file
// system, memory, CPUs and pids are read from the language's spec.
type limitsOutput struct {
	MemoryBytes          int64            `json:"memory_bytes"`
	CPUs                 float64          `json:"cpus"`
	Pids                 int64            `json:"pids"`
	FileBytes            int64            `json:"file_bytes"`
	OpenFiles            uint64           `json:"open_files"`
	TimeoutSeconds       float64          `json:"timeout_seconds"`
	MaxTimeoutSeconds    float64          `json:"max_timeout_seconds"`
	OutputBytesPerStream int64            `json:"output_bytes_per_stream"`
	CodeBytes            int64            `json:"code_bytes"`
	Network              bool             `json:"network"`
	ReadOnlyRootFS       bool             `json:"read_only_rootfs"`
	Writable             []writableOutput `json:"writable"`
	Home                 string           `json:"home"`
}

// writableOutput is a path a run can write to, and its size; 0 when the
// spec does not bound it.
type writableOutput struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// environmentsOutput is the environments resource.
type environmentsOutput struct {
	Languages map[string]environment `json:"languages"`
	Server    string                 `json:"server"`
	Version   string                 `json:"version"`
}

func environments(o Options, langs []config.Language, sandboxes []sandbox) environmentsOutput {
	out := environmentsOutput{Server: serverName, Version: o.Version, Languages: map[string]environment{}}
	for i, l := range langs {
		lim, sb := l.Limits, sandboxes[i]
		writable := make([]writableOutput, 0, len(sb.Writable))
		for _, w := range sb.Writable {
			writable = append(writable, writableOutput{Path: w.Path, Bytes: w.Bytes})
		}
		out.Languages[l.Name] = environment{
			Tool: l.Tool, Image: l.Image, Command: l.Command, File: l.File, Description: l.Description,
			Limits: limitsOutput{
				MemoryBytes: sb.MemoryBytes, CPUs: sb.CPUs, Pids: sb.Pids,
				FileBytes: lim.FileBytes, OpenFiles: lim.OpenFiles,
				TimeoutSeconds:       lim.Timeout.Seconds(),
				MaxTimeoutSeconds:    lim.MaxTimeout.Seconds(),
				OutputBytesPerStream: lim.OutputBytes, CodeBytes: lim.CodeBytes,
				Network: sb.Network, ReadOnlyRootFS: sb.ReadOnlyRoot, Writable: writable, Home: sb.Home,
			},
		}
	}
	return out
}
