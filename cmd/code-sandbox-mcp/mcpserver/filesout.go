package mcpserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/oci"
)

// fileOutput is one output file in a result's structuredContent.
type fileOutput struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	MIMEType string `json:"mime_type"`
	SHA256   string `json:"sha256"`
	URI      string `json:"uri"`
}

// filesReport is what a result says of a run's output files.
type filesReport struct {
	// files are for structuredContent, in the run's order.
	files []fileOutput
	// content is an image block for each image shown inline and an
	// embedded resource for each display file, in the files' order, then
	// a resource link for each file, if the files were kept.
	content []mcp.Content
	// line is the text's line on the files; "" if there were none.
	line string
}

// retention is how a run's output files were kept: under id, for keep;
// id is "" if they were not kept. cost is what they would cost the store
// (runCost), whose principals' runs each cost at most share of maxBytes,
// shared by clients.
type retention struct {
	id       string
	keep     time.Duration
	maxBytes int64
	share    int64
	clients  int
	cost     int64
}

// displayDir is the directory of the workspace where the Python hook's
// display() saves SVG and HTML (display-N.svg, display-N.html).
const displayDir = "display/"

// displayBytes bounds each SVG or HTML file of displayDir embedded in a
// result, as the hook bounds what it writes; displayTotalBytes bounds
// them all together. Past either, the file is only listed and linked.
const (
	displayBytes      = 256 << 10
	displayTotalBytes = 1 << 20
)

// displayType is the MIME type of a file of displayDir the result embeds
// as a resource: image/svg+xml or text/html by its extension, for a path
// directly in displayDir; "" for any other file.
func displayType(p string) string {
	rest, ok := strings.CutPrefix(p, displayDir)
	if !ok || strings.Contains(rest, "/") {
		return ""
	}
	switch strings.ToLower(path.Ext(rest)) {
	case ".svg":
		return "image/svg+xml"
	case ".html", ".htm":
		return "text/html"
	}
	return ""
}

// reportFiles describes a run's output files: each with a link to its
// URI if they were kept, images also inline, up to lim.MaxImages of at
// most lim.ImageBytes each, and the SVG and HTML of display() (see
// displayType) embedded as resources, up to displayBytes each and
// displayTotalBytes in all.
func reportFiles(r *exec.Result, lim config.Limits, kept retention) filesReport {
	rep := filesReport{files: make([]fileOutput, 0, len(r.Files))}
	var listed, notInline []string
	var links []mcp.Content
	shown := 0
	var embedded int64
	for _, f := range r.Files {
		size := int64(len(f.Data))
		mimeType := fileMIMEType(f.Path, f.Data)
		sum := sha256.Sum256(f.Data)
		out := fileOutput{Path: f.Path, Size: size, MIMEType: mimeType, SHA256: hex.EncodeToString(sum[:])}
		listed = append(listed, fmt.Sprintf("%s (%s)", f.Path, humanSize(size)))
		if imageType(f.Data) != "" {
			switch {
			case size > lim.ImageBytes:
				notInline = append(notInline, fmt.Sprintf("%s is over image_bytes (%s)", f.Path, config.Size(lim.ImageBytes)))
			case shown >= lim.MaxImages:
				notInline = append(notInline, fmt.Sprintf("%s is past max_images (%d)", f.Path, lim.MaxImages))
			default:
				rep.content = append(rep.content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(f.Data), mimeType))
				shown++
			}
		}
		if t := displayType(f.Path); t != "" {
			switch {
			case size > displayBytes:
				notInline = append(notInline, fmt.Sprintf("%s is over %s", f.Path, config.Size(displayBytes)))
			case embedded+size > displayTotalBytes:
				notInline = append(notInline, fmt.Sprintf("%s is past %s of display files in all", f.Path, config.Size(displayTotalBytes)))
			case !utf8.Valid(f.Data):
				notInline = append(notInline, fmt.Sprintf("%s is not UTF-8", f.Path))
			default:
				// Its URI names the file: where it can be read back if it
				// was kept, else where the program left it.
				uri := "file://" + oci.WorkspaceDir + "/" + f.Path
				if kept.id != "" {
					uri = fileURI(kept.id, f.Path)
				}
				rep.content = append(rep.content, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: uri, MIMEType: t, Text: string(f.Data)}))
				embedded += size
			}
		}
		if kept.id != "" {
			out.URI = fileURI(kept.id, f.Path)
			link := mcp.NewResourceLink(out.URI, f.Path,
				fmt.Sprintf("%s/%s as the run left it; readable for %s after the run", oci.WorkspaceDir, f.Path, kept.keep), mimeType)
			link.Size = &size
			links = append(links, link)
		}
		rep.files = append(rep.files, out)
	}
	rep.content = append(rep.content, links...)
	rep.line = filesLine(listed, r.FilesDropped, lim, notInline, kept)
	return rep
}

// filesLine is the text's line on a run's files, such as "Files in
// /workspace: data.csv (1.2KiB), figures/figure-1.png (20.1KiB); 2 more
// not returned: ...". It is "" if the run left no files.
func filesLine(listed []string, dropped int, lim config.Limits, notInline []string, kept retention) string {
	if len(listed) == 0 && dropped == 0 {
		return ""
	}
	parts := []string{"Files in " + oci.WorkspaceDir + ": none returned"}
	if len(listed) > 0 {
		parts[0] = "Files in " + oci.WorkspaceDir + ": " + strings.Join(listed, ", ")
	}
	if dropped > 0 {
		more := ""
		if len(listed) > 0 {
			more = " more"
		}
		parts = append(parts, fmt.Sprintf("%d%s not returned: past max_files_out (%d) or files_out_bytes (%s), or named with bytes that are not printable UTF-8",
			dropped, more, lim.MaxFilesOut, config.Size(lim.FilesOutBytes)))
	}
	if len(notInline) > 0 {
		parts = append(parts, "links only, not shown inline: "+joinAnd(notInline))
	}
	if len(listed) > 0 && kept.id == "" {
		parts = append(parts, notKept(kept))
	}
	return strings.Join(parts, "; ")
}

// notKept says why a run's files were not kept: what they cost, names
// and bookkeeping included, is over file_retention_bytes, or over the
// caller's share of it when clients share it.
func notKept(kept retention) string {
	if kept.clients <= 1 {
		return fmt.Sprintf("not kept for reading back: together, with their names, they take %s, over file_retention_bytes (%s)",
			humanSize(kept.cost), config.Size(kept.maxBytes))
	}
	return fmt.Sprintf("not kept for reading back: together, with their names, they take %s, over your share of file_retention_bytes (%s of %s, shared by %d clients)",
		humanSize(kept.cost), humanSize(kept.share), config.Size(kept.maxBytes), kept.clients)
}

// humanSize is a file's size to a tenth of its unit, such as "512B" or
// "1.2KiB".
func humanSize(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%dB", n)
	}
	f, units := float64(n)/(1<<10), []string{"KiB", "MiB", "GiB"}
	i := 0
	for f >= 1<<10 && i < len(units)-1 {
		f /= 1 << 10
		i++
	}
	return fmt.Sprintf("%.1f%s", f, units[i])
}

// imageType is the MIME type of an image a client can show, read from
// its first bytes: PNG, JPEG, GIF or WebP; "" for anything else.
func imageType(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// extensionTypes are the MIME types of the extensions programs write
// most, which do not depend on the host's mime.types.
var extensionTypes = map[string]string{
	".csv":  "text/csv",
	".tsv":  "text/tab-separated-values",
	".txt":  "text/plain",
	".log":  "text/plain",
	".md":   "text/markdown",
	".py":   "text/x-python",
	".js":   "text/javascript",
	".mjs":  "text/javascript",
	".html": "text/html",
	".htm":  "text/html",
	".css":  "text/css",
	".json": "application/json",
	".xml":  "application/xml",
	".yaml": "application/yaml",
	".yml":  "application/yaml",
	".svg":  "image/svg+xml",
	".pdf":  "application/pdf",
	".zip":  "application/zip",
}

// fileMIMEType is the MIME type of an output file, without parameters:
// an image's read from its bytes (see imageType); otherwise the one of
// its extension, from extensionTypes or mime.TypeByExtension, but never
// an image type its bytes belie; otherwise text/plain for UTF-8 without
// NUL, application/octet-stream for the rest.
func fileMIMEType(p string, data []byte) string {
	if t := imageType(data); t != "" {
		return t
	}
	ext := strings.ToLower(path.Ext(p))
	t, ok := extensionTypes[ext]
	if !ok && ext != "" {
		t, _, _ = strings.Cut(mime.TypeByExtension(ext), ";")
		t = strings.TrimSpace(t)
	}
	switch {
	case t == "image/png", t == "image/jpeg", t == "image/gif", t == "image/webp":
		return "application/octet-stream"
	case t != "":
		return t
	case utf8.Valid(data) && bytes.IndexByte(data, 0) < 0:
		return "text/plain"
	}
	return "application/octet-stream"
}

// isTextType reports whether a MIME type is text, which resources/read
// sends as text when it is valid UTF-8.
func isTextType(t string) bool {
	switch t {
	case "application/json", "application/xml", "application/yaml", "application/javascript", "image/svg+xml":
		return true
	}
	return strings.HasPrefix(t, "text/")
}
