package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// diffPage is a task's last diff as its page shows it: file by file, each
// line marked as added, deleted, a hunk's head or git's own.
type diffPage struct {
	ID, Title string
	Attempt   int
	Stat      string
	Cut       string
	Files     []diffFile
}

// diffFile is one file of a diff.
type diffFile struct {
	Path           string
	Added, Deleted int
	Binary         bool
	Lines          []diffLine
}

// diffLine is one line of a file's diff; Class is add, del, hunk, meta or
// "" (context).
type diffLine struct {
	Class, Text string
}

// diffText is a diff's stat, in words.
func diffText(files, insertions, deletions int) string {
	return fmt.Sprintf("%d file%s changed, +%d −%d", files, plural(files), insertions, deletions)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// diffOf reads a task's diff into files.
func diffOf(v api.TaskView, d api.Diff) diffPage {
	p := diffPage{ID: v.ID, Title: v.Title, Attempt: d.Attempt, Stat: diffText(d.Files, d.Insertions, d.Deletions)}
	if d.Cut {
		p.Cut = fmt.Sprintf("the agent kept the first %d KiB of a %d KiB diff; the rest is in the task's branch %s", state.MaxDiffBytes>>10, d.Bytes>>10, d.Branch)
	}
	p.Files = parseDiff(d.Patch)
	return p
}

// parseDiff splits a unified diff, as git diff prints it, into files.
func parseDiff(patch string) []diffFile {
	var files []diffFile
	var f *diffFile
	inHunk := false
	for line := range strings.SplitSeq(strings.TrimSuffix(patch, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok {
			files = append(files, diffFile{Path: gitPath(rest)})
			f, inHunk = &files[len(files)-1], false
			f.Lines = append(f.Lines, diffLine{Class: "meta", Text: line})
			continue
		}
		if f == nil {
			continue // nothing before the first file
		}
		class := ""
		switch {
		case strings.HasPrefix(line, "@@"):
			class, inHunk = "hunk", true
		case !inHunk:
			class = "meta"
			if p, ok := strings.CutPrefix(line, "+++ b/"); ok {
				f.Path = p
			}
			if strings.HasPrefix(line, "Binary files ") {
				f.Binary = true
			}
		case strings.HasPrefix(line, "+"):
			class = "add"
			f.Added++
		case strings.HasPrefix(line, "-"):
			class = "del"
			f.Deleted++
		}
		f.Lines = append(f.Lines, diffLine{Class: class, Text: line})
	}
	return files
}

// gitPath is the path of "a/PATH b/PATH", as git names a file in a diff's
// first line (a renamed file's new name is on its +++ line).
func gitPath(s string) string {
	if i := strings.Index(s, " b/"); i >= 0 {
		return s[i+3:]
	}
	return strings.TrimPrefix(s, "a/")
}

// taskDiff serves a task's last diff.
func (c *Console) taskDiff(w http.ResponseWriter, r *http.Request, s session) {
	id := r.PathValue("id")
	v := c.head(r.Context(), s, "tasks", "Diff of "+id, "")
	tv, err := c.backend.TaskView(r.Context(), id)
	if err != nil {
		c.pageError(w, v, err)
		return
	}
	d, err := c.backend.TaskDiff(r.Context(), id)
	if err != nil {
		c.pageError(w, v, err)
		return
	}
	v.Title = "Diff of " + state.Ellipsize(tv.Title, 60)
	v.Data = diffOf(tv, d)
	c.render(w, http.StatusOK, "diff", v)
}
