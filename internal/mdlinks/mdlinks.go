// Package mdlinks checks the links between a repository's markdown files:
// every relative link names a file or directory that exists, and every
// #anchor names a heading (an ATX heading, # Title) of the markdown file
// it points into, as GitHub makes a heading's anchor. Links with a scheme
// (https:, mailto:) are not followed.
package mdlinks

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Broken is a link whose file or anchor does not exist.
type Broken struct {
	File   string // the markdown file holding the link, relative to the root, slash-separated
	Line   int
	Target string // the link as written
	Reason string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", b.File, b.Line, b.Target, b.Reason)
}

// Check reads every markdown file under root, leaving out directories
// whose names start with a dot and those named testdata or node_modules,
// and returns the links that lead nowhere, by file and line.
func Check(root string) ([]Broken, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	anchors := map[string]map[string]bool{} // by file path, read once
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(src)
		anchors[path] = a
		return a, nil
	}
	var broken []Broken
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, file)
		if err != nil {
			return nil, err
		}
		for _, l := range relativeLinks(src) {
			b := Broken{File: filepath.ToSlash(rel), Line: l.Line, Target: l.Target}
			target, frag, err := splitTarget(l.Target)
			if err != nil {
				b.Reason = err.Error()
				broken = append(broken, b)
				continue
			}
			dest := file
			if target != "" {
				if strings.HasPrefix(target, "/") {
					dest = filepath.Join(root, filepath.FromSlash(target))
				} else {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				}
				if _, err := os.Stat(dest); err != nil {
					b.Reason = "no such file or directory"
					broken = append(broken, b)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				return nil, err
			}
			if !a[frag] {
				b.Reason = "no heading with anchor #" + frag
				broken = append(broken, b)
			}
		}
	}
	return broken, nil
}

func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules"
}

// splitTarget parses a link's target into its path and its fragment,
// both unescaped.
func splitTarget(t string) (path, frag string, err error) {
	path, frag, _ = strings.Cut(t, "#")
	if path, err = url.PathUnescape(path); err != nil {
		return "", "", fmt.Errorf("bad escape in path: %v", err)
	}
	if frag, err = url.PathUnescape(frag); err != nil {
		return "", "", fmt.Errorf("bad escape in anchor: %v", err)
	}
	return path, frag, nil
}

// link is a link in a markdown file.
type link struct {
	Line   int
	Target string
}

var (
	// inlineLink is [text](target) or [text](target "title"); the text
	// may hold a code span or an image.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^()\s<>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef is a reference definition: [label]: target
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// heading is an ATX heading; a closing run of #s is not its text.
	heading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
)

// relativeLinks returns the relative links of a markdown text (those without a
// scheme), outside code blocks and code spans.
func relativeLinks(src []byte) []link {
	var out []link
	eachLine(src, func(n int, line string) {
		line = stripCodeSpans(line)
		var targets []string
		if m := refDef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if t == "" || scheme.MatchString(t) {
				continue
			}
			out = append(out, link{Line: n, Target: t})
		}
	})
	return out
}

// headingAnchors returns the anchors of a markdown text's headings, as GitHub
// makes them: slug of the heading's text, and for the second heading with
// the same slug "-1", the third "-2", and so on.
func headingAnchors(src []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	eachLine(src, func(_ int, line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[2])
		if n, ok := seen[s]; ok {
			seen[s] = n + 1
			anchors[s+"-"+strconv.Itoa(n+1)] = true
			return
		}
		seen[s] = 0
		anchors[s] = true
	})
	return anchors
}

var linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is the anchor GitHub gives a heading: its text without markup,
// lower-cased, with every character but letters, digits, spaces, hyphens
// and underscores dropped, and spaces made hyphens.
func slug(text string) string {
	text = linkText.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// eachLine calls f with each line of src outside fenced code blocks, and
// its number (from 1).
func eachLine(src []byte, f func(n int, line string)) {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	fence := "" // the fence that opened the block we are in
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if len(line)-len(trimmed) < 4 {
			if c := fenceOf(trimmed); c != "" {
				fence = c
				continue
			}
		}
		f(n, line)
	}
}

// fenceOf is the fence (``` or ~~~, or longer) that line opens, or "".
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// stripCodeSpans blanks what is between backticks, so that a link written
// as code is not taken for one.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		tick := line[i : i+n]
		end := strings.Index(line[i+n:], tick)
		if end < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		b.WriteString(strings.Repeat(" ", n+end+n))
		line = line[i+n+end+n:]
	}
}
