package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/workspace"
)

func newTasksDiffCmd() *cobra.Command {
	var (
		src          sourceFlags
		workDir      string
		stat, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "diff ID",
		Short: "Print the diff of a task's work against its base (--remote: the one the control plane keeps)",
		Long: `diff prints what a task that names a repository changed, as a unified
diff of its files against the commit its branch was made from: its commits
and, with --no-commit tasks, what it left uncommitted, untracked files as
added. Binary files are named, not carried; no external diff or text
conversion runs. On a terminal it is coloured (NO_COLOR turns that off);
control characters a task wrote are shown inert (\x1b), never obeyed.

By default it reads the task's workspace, as it is now, in the work
directory (--work-dir, else DATA_DIR/work) on the agent's machine; it works
while the agent runs. With --remote it prints the diff the control plane
keeps: the one the agent reported at the end of the task's last attempt,
its first 512 KiB (the rest is on the task's branch).

--stat prints a line per file and the total instead; --json the diff as
GET /v1/tasks/ID/diff answers it.`,
		Example: `  agent tasks diff t-1a2b3c4d5e
  agent tasks diff t-1a2b3c4d5e --stat
  agent tasks diff t-1a2b3c4d5e --remote --control-plane https://cp.example:8443 --token-file ~/.config/agent/operator-token`,
		Args: taskIDArg("diff ID"),

		ValidArgsFunction: completeTaskIDs(anyTask),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			var d api.Diff
			if src.remote {
				c, err := src.cp.client()
				if err != nil {
					return err
				}
				if d, err = c.TaskDiff(cmd.Context(), id); err != nil {
					return fmt.Errorf("tasks diff %s: %s", visible(id), visible(err.Error()))
				}
			} else {
				var err error
				if d, err = localDiff(cmd, src.dataDir, workDir, id); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			switch {
			case asJSON:
				return writeJSON(out, d)
			case stat:
				printDiffStat(out, newPalette(out), d)
			default:
				printPatch(out, newPalette(out), d.Patch)
			}
			if d.Patch == "" && !asJSON {
				cmd.PrintErrf("agent: task %s: no change against its base %s\n", visible(id), visible(shortCommit(d.BaseCommit)))
			}
			if d.Cut && !asJSON {
				cmd.PrintErrf("agent: the first %s of a diff of %s: the rest is on the task's branch %s\n",
					bytesize.Text(int64(len(d.Patch))), bytesize.Text(d.Bytes), visible(d.Branch))
			}
			return nil
		},
	}
	src.add(cmd)
	agentSettings.bind(useSettings(cmd, agentSettings), "work-dir", &workDir)
	cmd.Flags().BoolVar(&stat, "stat", false, "print a line per file (+added −deleted) and the total, not the diff")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diff as GET /v1/tasks/ID/diff answers it: task_id, attempt, at, repo, branch, base_commit, head, files, insertions, deletions, patch, bytes, cut")
	return cmd
}

// localDiff is the diff of task id's workspace as it is now.
func localDiff(cmd *cobra.Command, dataDir, workDir, id string) (api.Diff, error) {
	root := workDir
	if root == "" {
		root = filepath.Join(dataDir, "work")
	}
	m, err := workspace.New(root, nil)
	if err != nil {
		return api.Diff{}, err
	}
	ev, err := m.Diff(cmd.Context(), id)
	if errors.Is(err, workspace.ErrNoWorkspace) {
		return api.Diff{}, fmt.Errorf("task %s has no workspace in %s: it names no repository, or retention removed it; --remote prints the diff the control plane keeps", visible(id), root)
	}
	if err != nil {
		return api.Diff{}, fmt.Errorf("tasks diff %s: %s", visible(id), visible(err.Error()))
	}
	d := api.Diff{TaskID: id, At: time.Now().UTC(), DiffEvent: *ev}
	if t, err := datadir.LoadTask(dataDir, id); err == nil {
		if c := t.Current(); c != nil {
			d.Attempt = c.Number
		}
	}
	return d, nil
}

// shortCommit is the start of a commit's id, as git shows it.
func shortCommit(s string) string { return s[:min(len(s), 7)] }

// printPatch prints a patch line by line, each made safe to print (tabs
// kept) and, on a terminal, coloured: a file's head yellow, a hunk's
// cyan, added lines green, deleted red.
func printPatch(w io.Writer, p palette, patch string) {
	inHunk := false
	for line := range strings.SplitSeq(strings.TrimSuffix(patch, "\n"), "\n") {
		if patch == "" {
			return
		}
		colour := colourPlain
		switch {
		case strings.HasPrefix(line, "diff --git "):
			colour, inHunk = colourYellow, false
		case strings.HasPrefix(line, "@@"):
			colour, inHunk = colourCyan, true
		case inHunk && strings.HasPrefix(line, "+"):
			colour = colourGreen
		case inHunk && strings.HasPrefix(line, "-"):
			colour = colourRed
		}
		fmt.Fprintln(w, p.paint(colour, visibleLine(line)))
	}
}

// visibleLine is visible(line), its tabs kept: a patch's indentation.
func visibleLine(line string) string {
	parts := strings.Split(line, "\t")
	for i, s := range parts {
		parts[i] = visible(s)
	}
	return strings.Join(parts, "\t")
}

// patchFile is one file of a patch, as its lines count it.
type patchFile struct {
	path           string
	added, deleted int
	binary         bool
}

// patchFiles reads a unified diff, as git diff prints it, file by file.
func patchFiles(patch string) []patchFile {
	var files []patchFile
	inHunk := false
	for line := range strings.SplitSeq(patch, "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok {
			path := strings.TrimPrefix(rest, "a/")
			if i := strings.Index(rest, " b/"); i >= 0 {
				path = rest[i+3:]
			}
			files, inHunk = append(files, patchFile{path: path}), false
			continue
		}
		if len(files) == 0 {
			continue
		}
		f := &files[len(files)-1]
		switch {
		case strings.HasPrefix(line, "@@"):
			inHunk = true
		case !inHunk && strings.HasPrefix(line, "Binary files "):
			f.binary = true
		case inHunk && strings.HasPrefix(line, "+"):
			f.added++
		case inHunk && strings.HasPrefix(line, "-"):
			f.deleted++
		}
	}
	return files
}

// printDiffStat prints a line per file of d's patch and the total: the
// diff's own, which counts what a cut patch no longer shows.
func printDiffStat(w io.Writer, p palette, d api.Diff) {
	files := patchFiles(d.Patch)
	width := 0
	for _, f := range files {
		width = max(width, len([]rune(visible(f.path))))
	}
	for _, f := range files {
		path := visible(f.path)
		change := p.paint(colourGreen, fmt.Sprintf("+%d", f.added)) + " " + p.paint(colourRed, fmt.Sprintf("-%d", f.deleted))
		if f.binary {
			change = "binary"
		}
		fmt.Fprintf(w, " %s%s | %s\n", path, strings.Repeat(" ", width-len([]rune(path))), change)
	}
	total := fmt.Sprintf(" %d file%s changed, +%d -%d", d.Files, pluralS(d.Files), d.Insertions, d.Deletions)
	if d.Cut {
		total += fmt.Sprintf(" (the files above are those of the first %s)", bytesize.Text(int64(len(d.Patch))))
	}
	fmt.Fprintln(w, total)
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
