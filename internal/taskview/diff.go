package taskview

import (
	"fmt"
	"io"
	"strings"

	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/state"
)

// Patch prints a patch line by line, each made safe to print (tabs
// kept) and, on a terminal, coloured: a file's head yellow, a hunk's
// cyan, added lines green, deleted red.
func Patch(w io.Writer, p Palette, patch string) {
	inHunk := false
	for line := range strings.SplitSeq(strings.TrimSuffix(patch, "\n"), "\n") {
		if patch == "" {
			return
		}
		colour := ColourPlain
		switch {
		case strings.HasPrefix(line, "diff --git "):
			colour, inHunk = ColourYellow, false
		case strings.HasPrefix(line, "@@"):
			colour, inHunk = ColourCyan, true
		case inHunk && strings.HasPrefix(line, "+"):
			colour = ColourGreen
		case inHunk && strings.HasPrefix(line, "-"):
			colour = ColourRed
		}
		fmt.Fprintln(w, p.Paint(colour, visibleLine(line)))
	}
}

// visibleLine is Visible(line), its tabs kept: a patch's indentation.
func visibleLine(line string) string {
	parts := strings.Split(line, "\t")
	for i, s := range parts {
		parts[i] = Visible(s)
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

// DiffStat prints a line per file of d's patch and the total: the
// diff's own, which counts what a cut patch no longer shows.
func DiffStat(w io.Writer, p Palette, d state.DiffEvent) {
	files := patchFiles(d.Patch)
	width := 0
	for _, f := range files {
		width = max(width, len([]rune(Visible(f.path))))
	}
	for _, f := range files {
		path := Visible(f.path)
		change := p.Paint(ColourGreen, fmt.Sprintf("+%d", f.added)) + " " + p.Paint(ColourRed, fmt.Sprintf("-%d", f.deleted))
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

// Diff prints task id's diff d on out (tasks diff): its patch, or with
// stat a line per file and the total. It says on errOut when there is no
// change against the base, and when the patch was cut, where the rest is.
func Diff(out, errOut io.Writer, id string, d state.DiffEvent, stat bool) {
	if stat {
		DiffStat(out, PaletteFor(out), d)
	} else {
		Patch(out, PaletteFor(out), d.Patch)
	}
	if d.Patch == "" {
		fmt.Fprintf(errOut, "agent: task %s: no change against its base %s\n", Visible(id), Visible(ShortCommit(d.BaseCommit)))
	}
	if d.Cut {
		fmt.Fprintf(errOut, "agent: the first %s of a diff of %s: the rest is on the task's branch %s\n",
			bytesize.Text(int64(len(d.Patch))), bytesize.Text(d.Bytes), Visible(d.Branch))
	}
}
