package workspace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"syscall"
)

// RefusedError is the manager's refusal to read what a task wrote in
// its git directory: a symbolic ref where its branch should be, a link
// or a special file among its objects, a branch naming no commit. What
// it says names the thing refused; nothing of it was followed.
type RefusedError struct{ msg string }

func (e *RefusedError) Error() string { return e.msg }

func refusef(format string, args ...any) error {
	return &RefusedError{msg: fmt.Sprintf(format, args...)}
}

// isRefused reports whether err is a refusal of what the task wrote, not
// a failure of the manager's own.
func isRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// maxRefs bounds the refs of a task's git directory the manager reads:
// beyond, it cannot tell what the clone holds.
const maxRefs = 1000

// refName is what the manager takes for a ref's name when it follows
// HEAD to a ref of the clone: git's usual names, nothing that leaves
// refs/.
var refName = regexp.MustCompile(`^refs/[A-Za-z0-9._/+-]+$`)

// taskGit is a task's git directory (ROOT/TASK_ID/.git), read as data:
// every file through an os.Root of the work directory, so that no link
// the task made leads out of it; refs parsed, never resolved by git.
type taskGit struct {
	dir    string // the work directory
	root   *os.Root
	oidLen int // 40 (SHA-1) or 64 (SHA-256)
}

// openTaskGit opens the git directory of work directory dir. It refuses
// one that is not a directory of its own (the task made .git a link or
// a file).
func openTaskGit(dir string, oidLen int) (*taskGit, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	info, err := root.Lstat(".git")
	if err != nil || !info.IsDir() {
		root.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, refusef("the task's git directory %s/.git is gone", dir)
		}
		return nil, refusef("the task's git directory %s/.git is not a directory (a link or a file the task made)", dir)
	}
	return &taskGit{dir: dir, root: root, oidLen: oidLen}, nil
}

func (g *taskGit) Close() error { return g.root.Close() }

// errNoRef: the clone has no such ref.
var errNoRef = errors.New("no such ref")

// refValue is a ref as its file says: an object id, or the name of the
// ref it links to.
type refValue struct{ oid, symbolic string }

// readSmall reads a regular file of the git directory, at most max
// bytes; a link, a directory or a special file (a FIFO that would block
// the reader) is refused, not opened.
func (g *taskGit) readSmall(name string, max int64) ([]byte, error) {
	p := path.Join(".git", name)
	info, err := g.root.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, refusef("%s/%s is not a regular file", g.dir, p)
	}
	f, err := g.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, refusef("%s/%s is not a regular file", g.dir, p)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, refusef("%s/%s is over %d bytes", g.dir, p, max)
	}
	return b, err
}

// parseRef parses a loose ref's (or HEAD's) content.
func (g *taskGit) parseRef(name string, b []byte) (refValue, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if target, ok := strings.CutPrefix(s, "ref:"); ok {
		return refValue{symbolic: strings.TrimSpace(target)}, nil
	}
	if isOID(s, g.oidLen) {
		return refValue{oid: s}, nil
	}
	return refValue{}, refusef("the task's %s holds %q, not a commit id", name, clip(s))
}

// ref reads ref name (refs/...) of the clone: its loose file if there is
// one, else its line in packed-refs. It wraps errNoRef when there is
// neither.
func (g *taskGit) ref(name string) (refValue, error) {
	b, err := g.readSmall(name, 4096)
	switch {
	case err == nil:
		return g.parseRef(name, b)
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && !isDirErr(g, name):
		return refValue{}, err
	}
	var found refValue
	err = g.packedRefs(func(oid, n string) bool {
		if n == name {
			found.oid = oid
			return false
		}
		return true
	})
	if err != nil {
		return refValue{}, err
	}
	if found.oid == "" {
		return refValue{}, fmt.Errorf("%w: %s", errNoRef, name)
	}
	return found, nil
}

// isDirErr reports whether the loose ref name is a directory (a ref
// below it, refs/heads/agent/ID/x, may be packed): then there is no
// loose ref of that name.
func isDirErr(g *taskGit, name string) bool {
	info, err := g.root.Lstat(path.Join(".git", name))
	return err == nil && info.IsDir()
}

// packedRefs calls each for every ref packed-refs lists, until it says
// to stop.
func (g *taskGit) packedRefs(each func(oid, name string) bool) error {
	p := ".git/packed-refs"
	info, err := g.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return refusef("%s/%s is not a regular file", g.dir, p)
	}
	f, err := g.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		oid, name, ok := strings.Cut(line, " ")
		if ok && isOID(oid, g.oidLen) && !each(oid, name) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return refusef("%s/%s: %v", g.dir, p, err)
	}
	return nil
}

// tips are the object ids the clone's refs and HEAD name, each once:
// what it holds. Symbolic refs are not followed (what they link to is
// counted as itself); HEAD is followed one step, to a ref of the clone.
// More than maxRefs is refused: the manager cannot tell what it holds.
func (g *taskGit) tips() ([]string, error) {
	seen := map[string]bool{}
	var tips []string
	add := func(oid string) error {
		if !seen[oid] {
			if len(tips) == maxRefs {
				return refusef("the task's git directory has over %d refs", maxRefs)
			}
			seen[oid] = true
			tips = append(tips, oid)
		}
		return nil
	}
	loose := map[string]bool{}
	err := fs.WalkDir(g.root.FS(), ".git/refs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == ".git/refs" && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil // directories walked; links and special files not read
		}
		name := strings.TrimPrefix(p, ".git/")
		loose[name] = true
		b, err := g.readSmall(name, 4096)
		if err != nil {
			return nil // changed meanwhile, or not a file: not a ref
		}
		if v, err := g.parseRef(name, b); err == nil && v.oid != "" {
			return add(v.oid)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var addErr error
	if err := g.packedRefs(func(oid, name string) bool {
		if !loose[name] {
			addErr = add(oid)
		}
		return addErr == nil
	}); err != nil {
		return nil, err
	}
	if addErr != nil {
		return nil, addErr
	}
	if oid, err := g.head(); err == nil {
		if err := add(oid); err != nil {
			return nil, err
		}
	}
	return tips, nil
}

// head is the commit the clone's HEAD names: its object id when
// detached, else that of the ref it links to, read as any other.
func (g *taskGit) head() (string, error) {
	b, err := g.readSmall("HEAD", 4096)
	if err != nil {
		return "", err
	}
	v, err := g.parseRef("HEAD", b)
	if err != nil {
		return "", err
	}
	if v.oid != "" {
		return v.oid, nil
	}
	if !refName.MatchString(v.symbolic) || strings.Contains(v.symbolic, "..") || strings.Contains(v.symbolic, "//") {
		return "", refusef("the task's HEAD links to %q", clip(v.symbolic))
	}
	r, err := g.ref(v.symbolic)
	if err != nil {
		return "", err
	}
	if r.oid == "" {
		return "", refusef("the task's HEAD links to %s, a symbolic ref", v.symbolic)
	}
	return r.oid, nil
}

// checkObjects makes the clone's object directory fit for git to read on
// the manager's behalf. Git reads it by path, following links, so it
// must hold only what git makes there: directories (the loose objects'
// fan-out, pack, info) holding regular files. A link, or a special file
// (a FIFO would block the reader), anywhere in the first two levels is
// refused. Its alternates file, which git follows too, is written anew
// to name the repository's objects alone, whatever the task put there.
// It is only sound while nothing of the task runs: the manager calls it
// between attempts and after the task's end.
func (g *taskGit) checkObjects(repoObjects string) error {
	const objects = ".git/objects"
	info, err := g.root.Lstat(objects)
	if err != nil || !info.IsDir() {
		return refusef("the task's object directory %s/%s is not a directory", g.dir, objects)
	}
	entries, err := fs.ReadDir(g.root.FS(), objects)
	if err != nil {
		return objectsFault(err)
	}
	for _, e := range entries {
		p := objects + "/" + e.Name()
		switch {
		case e.Type().IsRegular():
			continue
		case !e.IsDir():
			return refusef("the task's object directory holds %s, which is not a file or a directory", p)
		}
		inner, err := fs.ReadDir(g.root.FS(), p)
		if err != nil {
			return objectsFault(err)
		}
		for _, f := range inner {
			if !f.Type().IsRegular() && !f.IsDir() {
				return refusef("the task's object directory holds %s/%s, which is not a file or a directory", p, f.Name())
			}
		}
	}
	want := repoObjects + "\n"
	const alternates = objects + "/info/alternates"
	if b, err := g.readSmall("objects/info/alternates", 64<<10); err == nil && string(b) == want {
		return nil
	}
	// What keeps these from working is what the task made of its clone.
	if err := g.root.MkdirAll(objects+"/info", 0o755); err != nil {
		return objectsFault(err)
	}
	tmp := alternates + ".agent"
	_ = g.root.Remove(tmp)
	if err := g.root.WriteFile(tmp, []byte(want), 0o644); err != nil {
		return objectsFault(err)
	}
	if err := g.root.Rename(tmp, alternates); err != nil {
		return objectsFault(err)
	}
	return nil
}

// objectsFault is err, met in the task's object directory: a refusal of
// what the task made of it, unless the file system itself failed (full,
// read only, broken), which is the agent's to report.
func objectsFault(err error) error { return fault("the task's object directory", err) }

// fault is err, met writing in the task's git directory (where): a
// refusal of what the task made of it, unless the file system itself
// failed (full, read only, broken), which is the agent's to report.
func fault(where string, err error) error {
	for _, fsErr := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
		if errors.Is(err, fsErr) {
			return err
		}
	}
	return refusef("%s: %v", where, err)
}

// isOID reports whether s is an object id of n hex digits, in git's
// lower case.
func isOID(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// clip cuts what a task wrote to a length fit for one line of an error.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s), "?")
}
