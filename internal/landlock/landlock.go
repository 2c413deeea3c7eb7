// Package landlock confines the files a process tree can reach, with the
// kernel's Landlock security module (Linux 5.13 and later; no privilege
// needed, and nothing a confined process does can lift it).
//
// The agent confines each attempt with it: a task reads what the agent's
// user can read except the agent's own files (its data directory, token
// files and config file) and the person's credentials (package
// isolation), writes only its work directory, its temporary directory and
// its CLI's own state, and cannot signal or trace a process outside its
// attempt.
//
// A Policy names hierarchies to read, hierarchies to write, and paths to
// deny. Landlock grants access beneath a directory and cannot take it back
// lower down, so a denied path inside a granted hierarchy is cut out: the
// hierarchy is granted entry by entry beside the denied path, level by
// level, down to it (Policy.Rules). The directories on the way to a denied
// path keep no right of their own: nothing can be created, removed or
// renamed directly in them (listing them is allowed: see ListAll). A grant
// inside a denied path (a task's work directory inside the data
// directory) is an exception to the denial and stands.
//
// Landlock follows the file hierarchy, not names: a symbolic link is
// judged where it leads, and a hard link to a denied file cannot be made
// from a confined process. What it does not cover: a bind mount of a denied
// directory elsewhere (the mount's own path is what counts), connecting to
// a Unix socket by its path, and the network.
package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Policy says what a confined process tree may reach. Paths are absolute;
// symbolic links in them are resolved. Read and Write paths that do not
// exist are left out; a denied path that does not exist (yet) is kept:
// the hierarchy that would hold it is cut out like any other's, so that,
// made later, it is denied too (see Policy.Rules).
type Policy struct {
	// Read are hierarchies whose files may be read and executed.
	Read []string
	// Write are hierarchies that may also be changed: files written,
	// truncated, created, removed and renamed.
	Write []string
	// Deny are files and hierarchies neither read nor written, cut out of
	// the Read and Write hierarchies that hold them, whether they exist
	// yet or not.
	Deny []string
	// ListAll lets every directory be listed, denied ones included: names
	// can be seen, no denied file opened. Without it, the directories on
	// the way to a denied path cannot be listed either (ls ~ fails when
	// the agent's files are in the home directory).
	ListAll bool
}

// Access is a set of Landlock file access rights (LANDLOCK_ACCESS_FS_*).
type Access uint64

// The rights, as the kernel numbers them.
const (
	Execute    Access = 1 << 0
	WriteFile  Access = 1 << 1
	ReadFile   Access = 1 << 2
	ReadDir    Access = 1 << 3
	RemoveDir  Access = 1 << 4
	RemoveFile Access = 1 << 5
	MakeChar   Access = 1 << 6
	MakeDir    Access = 1 << 7
	MakeReg    Access = 1 << 8
	MakeSock   Access = 1 << 9
	MakeFifo   Access = 1 << 10
	MakeBlock  Access = 1 << 11
	MakeSym    Access = 1 << 12
	Refer      Access = 1 << 13 // ABI 2
	Truncate   Access = 1 << 14 // ABI 3
	IoctlDev   Access = 1 << 15 // ABI 5
)

// The sets a Policy grants.
const (
	// ReadAccess reads and executes files and lists directories.
	ReadAccess = Execute | ReadFile | ReadDir
	// WriteAccess is every right.
	WriteAccess = ReadAccess | WriteFile | RemoveDir | RemoveFile | MakeChar | MakeDir | MakeReg |
		MakeSock | MakeFifo | MakeBlock | MakeSym | Refer | Truncate | IoctlDev
	// fileAccess are the rights that mean something on a file (not a
	// directory); a rule on a file may hold only these.
	fileAccess = Execute | WriteFile | ReadFile | Truncate | IoctlDev
)

// handled is every right the kernel of a given ABI version knows.
func handled(abi int) Access {
	a := Access(1<<13 - 1) // ABI 1
	if abi >= 2 {
		a |= Refer
	}
	if abi >= 3 {
		a |= Truncate
	}
	if abi >= 5 {
		a |= IoctlDev
	}
	return a
}

// Rule grants Access beneath Path (or to the file Path).
type Rule struct {
	Path   string
	Access Access
}

// Rules turns the policy into the rules Landlock takes: each Read and Write
// hierarchy that holds a denied path is split beside it. Entries that are
// symbolic links get no rule of their own: where they lead is judged on
// its own place.
//
// Rules are made of the entries that exist when they are made: an entry
// made later in a directory on the way to a denied path has no rule, so
// it is denied. That is what keeps a denied path that does not exist yet
// (~/.aws, before the person's first aws configure) denied once it is
// made: the directory that would hold it (~) is split, not granted whole.
func (p Policy) Rules() ([]Rule, error) {
	deny := denyPaths(p.Deny)
	var rules []Rule
	add := func(paths []string, acc Access) error {
		for _, path := range realPaths(paths) {
			if within(path, deny) {
				// A grant inside a denied path is an exception to it.
				rules = append(rules, Rule{path, acc})
				continue
			}
			if err := split(path, acc, deny, &rules); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(p.Read, ReadAccess); err != nil {
		return nil, err
	}
	if err := add(p.Write, WriteAccess); err != nil {
		return nil, err
	}
	if p.ListAll {
		rules = append(rules, Rule{"/", ReadDir})
	}
	return rules, nil
}

// split grants acc beneath path, less the denied paths inside it.
func split(path string, acc Access, deny []string, rules *[]Rule) error {
	if slices.Contains(deny, path) {
		return nil
	}
	if !holdsAny(path, deny) {
		*rules = append(*rules, Rule{path, acc})
		return nil
	}
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("landlock: list %s to cut a denied path out of it: %w", path, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("landlock: list %s to cut a denied path out of it: %w", path, err)
	}
	sort.Strings(names)
	for _, name := range names {
		child := filepath.Join(path, name)
		info, err := os.Lstat(child)
		if err != nil || info.Mode()&os.ModeSymlink != 0 {
			continue // gone since, or a link: judged where it leads
		}
		if err := split(child, acc, deny, rules); err != nil {
			return err
		}
	}
	return nil
}

// realPaths resolves paths, dropping those that do not exist, and sorts
// them without duplicates.
func realPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			continue
		}
		out = append(out, real)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// denyPaths resolves denied paths like realPaths, but keeps those that do
// not exist: each is resolved as far as it exists (its nearest existing
// directory, symbolic links resolved) and the rest of it is kept as named.
func denyPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			out = append(out, real)
		} else if real, ok := resolveMissing(abs); ok {
			out = append(out, real)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// resolveMissing resolves the part of abs that exists and keeps the rest
// as named; false when nothing of it can be resolved for another reason
// than its absence (a directory on the way that cannot be searched).
func resolveMissing(abs string) (string, bool) {
	var rest []string
	for dir := abs; ; {
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		rest = append(rest, filepath.Base(dir))
		real, err := filepath.EvalSymlinks(parent)
		if err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...), true
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", false
		}
		dir = parent
	}
}

// within reports whether path is one of dirs or lies beneath one.
func within(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || isBeneath(path, d) {
			return true
		}
	}
	return false
}

// holdsAny reports whether one of paths lies beneath dir.
func holdsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if isBeneath(p, dir) {
			return true
		}
	}
	return false
}

// isBeneath reports whether path lies strictly beneath dir.
func isBeneath(path, dir string) bool {
	if dir == "/" {
		return path != "/"
	}
	return strings.HasPrefix(path, dir+"/")
}

// ErrUnsupported is returned where the kernel has no Landlock, or it is
// turned off.
var ErrUnsupported = errors.New("landlock is not available")
