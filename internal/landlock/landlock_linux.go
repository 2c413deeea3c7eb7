package landlock

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ABI is the Landlock ABI version the kernel offers: 0 where it has none
// (too old, or Landlock is not among the enabled security modules).
func ABI() int {
	abi, _ := Probe()
	return abi
}

// Probe is the Landlock ABI version the kernel offers, or why there is
// none, in words an operator can act on.
func Probe() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch errno {
	case 0:
		return int(v), nil
	case unix.ENOSYS:
		return 0, fmt.Errorf("%w: the kernel has none (Linux 5.13 or later has it)", ErrUnsupported)
	case unix.EOPNOTSUPP:
		return 0, fmt.Errorf("%w: the kernel has it turned off (boot with landlock among lsm=...)", ErrUnsupported)
	}
	return 0, fmt.Errorf("%w: %v (a seccomp filter refusing landlock_create_ruleset?)", ErrUnsupported, errno)
}

// scopedABI is the first ABI that scopes signals and abstract Unix
// sockets to the confined tree.
const scopedABI = 6

// RestrictThread confines the calling OS thread, and every process it
// starts from now on, to the policy: files by its rules; and, where the
// kernel has ABI 6 or later, no signal to and no abstract Unix socket of a
// process outside. It sets no_new_privs on the thread (setuid programs no
// longer gain privileges). The thread can never be freed again: call it
// from a goroutine locked to its thread (runtime.LockOSThread) that never
// unlocks it.
func RestrictThread(p Policy) (abi int, err error) {
	r, err := Prepare(p)
	if err != nil {
		return ABI(), err
	}
	return r.RestrictThread()
}

// Ruleset is a policy made into the kernel's rules, ready to confine a
// thread: made by a process that can still reach every path the policy
// names (a root keeper listing /root to cut a denied path out of it),
// then applied after it gave up what it could (a task user's).
type Ruleset struct {
	fd, abi int
}

// Prepare makes p's rules; RestrictThread applies them, Close drops them.
func Prepare(p Policy) (*Ruleset, error) {
	abi := ABI()
	if abi == 0 {
		return nil, ErrUnsupported
	}
	rules, err := p.Rules()
	if err != nil {
		return nil, err
	}
	handledFS := handled(abi)
	attr := unix.LandlockRulesetAttr{Access_fs: uint64(handledFS)}
	size := unsafe.Offsetof(attr.Scoped) // the struct as ABI 1 to 5 know it
	if abi >= scopedABI {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0) // its descriptor is close-on-exec
	if errno != 0 {
		return nil, fmt.Errorf("landlock: create a ruleset: %w", errno)
	}
	r := &Ruleset{fd: int(fd), abi: abi}
	for _, rule := range rules {
		if err := addRule(r.fd, rule, handledFS); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// RestrictThread confines the calling OS thread as the package's
// RestrictThread does, with the rules made, and closes them.
func (r *Ruleset) RestrictThread() (abi int, err error) {
	defer r.Close()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return r.abi, fmt.Errorf("landlock: set no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(r.fd), 0, 0); errno != 0 {
		return r.abi, fmt.Errorf("landlock: restrict: %w", errno)
	}
	return r.abi, nil
}

// Close drops the rules made.
func (r *Ruleset) Close() {
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// addRule adds one rule. A path that went away since the rules were made
// is skipped; a file gets only the rights that mean something on a file.
func addRule(ruleset int, r Rule, handledFS Access) error {
	fd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock: open %s: %w", r.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock: stat %s: %w", r.Path, err)
	}
	acc := r.Access & handledFS
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		acc &= fileAccess
	}
	if acc == 0 {
		return nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: uint64(acc), Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock: add a rule for %s: %w", r.Path, errno)
	}
	return nil
}
