package keeper

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/landlock"
)

// The stage is the executor's process before it is the executor: a
// process of the agent's own binary that the keeper starts, where needed,
// in a network namespace of its own. There it sets loopback up, makes the
// listeners the keeper serves the attempt on and hands them over; then it
// gives up what it holds (the capabilities of a root agent, root's own
// user for --task-user), confines itself with Landlock and execs the
// executor. The keeper stays outside, unconfined, and dials out for the
// attempt.
//
// keeper → stage  one line: stageSpec
// stage → keeper  {"listen": {...}} with the listeners' descriptors, when
//                 it has a network namespace; {"error": "...", "errno": 2}
//                 when it cannot go on; nothing else, and end of file once
//                 it has exec'd the executor (the socket closes on exec).

// stageArg0 and probeArg0 are the argv[0] of a stage and of a probe of
// what a stage needs (ProbeEgress).
const (
	stageArg0 = "agent-attempt"
	probeArg0 = "agent-egress-probe"
)

// stageSpec is what a stage makes of itself.
type stageSpec struct {
	Path   string           `json:"path"`
	Args   []string         `json:"args"`
	Dir    string           `json:"dir,omitempty"`
	Env    []string         `json:"env"`
	Policy *landlock.Policy `json:"policy,omitempty"`
	// Forward are the loopback ports to listen on besides the proxy's;
	// Net says there is a network namespace to set up at all.
	Net     bool  `json:"net,omitempty"`
	Forward []int `json:"forward,omitempty"`
	// User is who the executor runs as; DropCaps drops every capability
	// (a root agent's attempts, whatever user they run as).
	User     *User `json:"user,omitempty"`
	DropCaps bool  `json:"drop_caps,omitempty"`
}

// stageReport is one line from a stage.
type stageReport struct {
	Listen *listening `json:"listen,omitempty"`
	Error  string     `json:"error,omitempty"`
	Errno  int        `json:"errno,omitempty"`
}

// listening says which listeners came with a report, in the order of its
// descriptors: the proxy's, then one per forwarded port.
type listening struct {
	Proxy   int   `json:"proxy"`
	Forward []int `json:"forward,omitempty"`
}

// staged reports whether the attempt needs a stage: a network namespace,
// another user, or a root keeper's capabilities to drop from a confined
// attempt.
func (a *attempt) staged() bool {
	return a.Egress != nil || a.User != nil || a.Policy != nil && os.Geteuid() == 0
}

// netnsAttr is how a process is started in a network namespace of its
// own. Root makes one outright; another user makes a user namespace for
// it, where it keeps its own uid and gid and only the capability to set
// loopback up, which the stage gives up before the executor starts.
func netnsAttr(sys *syscall.SysProcAttr) {
	sys.Cloneflags |= syscall.CLONE_NEWNET
	if os.Geteuid() == 0 {
		return
	}
	uid, gid := os.Geteuid(), os.Getegid()
	sys.Cloneflags |= syscall.CLONE_NEWUSER
	sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	sys.GidMappingsEnableSetgroups = false
	sys.AmbientCaps = []uintptr{unix.CAP_NET_ADMIN}
}

// startStaged starts the attempt's executor through a stage. It returns
// the executor's pid and, with a network namespace, the proxy serving it.
func startStaged(spec *attempt, stdio []*os.File) (int, *egress.Proxy, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("keeper: socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "stage socket"), os.NewFile(uintptr(fds[1]), "stage socket")
	defer ours.Close()
	sys := &syscall.SysProcAttr{Setpgid: true}
	ss := stageSpec{Path: spec.Path, Args: spec.Args, Dir: spec.Dir, Env: spec.Env, Policy: spec.Policy,
		User: spec.User, DropCaps: os.Geteuid() == 0}
	if spec.Egress != nil {
		netnsAttr(sys)
		ss.Net = true
		for _, r := range spec.Egress.Forwards() {
			ss.Forward = append(ss.Forward, r.Port)
		}
	}
	proc, err := os.StartProcess("/proc/self/exe", append([]string{stageArg0}, spec.Args...), &os.ProcAttr{
		Env: []string{}, Files: append(stdio[:3:3], theirs), Sys: sys})
	theirs.Close()
	if err != nil {
		return 0, nil, fmt.Errorf("keeper: start the attempt's stage: %w", err)
	}
	fail := func(err error) (int, *egress.Proxy, error) {
		_ = proc.Kill()
		_, _ = proc.Wait()
		return 0, nil, err
	}
	b, _ := json.Marshal(ss)
	if _, err := ours.Write(append(b, '\n')); err != nil {
		return fail(fmt.Errorf("keeper: send the stage its attempt: %w", err))
	}
	var proxy *egress.Proxy
	err = readReports(ours, func(r stageReport, files []*os.File) error {
		switch {
		case r.Error != "":
			return &StartError{Msg: r.Error, Errno: syscall.Errno(r.Errno)}
		case r.Listen != nil && spec.Egress != nil && proxy == nil:
			p, err := serveListeners(*spec.Egress, *r.Listen, files)
			proxy = p
			return err
		}
		for _, f := range files {
			f.Close()
		}
		return nil
	})
	if err != nil {
		if proxy != nil {
			proxy.Close()
		}
		return fail(err)
	}
	if spec.Egress != nil && proxy == nil {
		return fail(errors.New("keeper: the stage made no listeners for its network"))
	}
	return proc.Pid, proxy, nil
}

// serveListeners serves the proxy and the forwards on the listeners a
// stage made inside the attempt's network namespace.
func serveListeners(p egress.Policy, l listening, files []*os.File) (*egress.Proxy, error) {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(files) != 1+len(l.Forward) {
		return nil, fmt.Errorf("keeper: the stage sent %d listeners, not %d", len(files), 1+len(l.Forward))
	}
	proxy := egress.NewProxy(p)
	to := map[int]string{}
	for _, r := range p.Forwards() {
		to[r.Port] = r.String()
	}
	for i, f := range files {
		ln, err := net.FileListener(f)
		if err != nil {
			proxy.Close()
			return nil, fmt.Errorf("keeper: a listener of the stage: %w", err)
		}
		if i == 0 {
			proxy.ServeProxy(ln)
		} else if dest, ok := to[l.Forward[i-1]]; ok {
			proxy.ServeForward(ln, dest)
		} else {
			ln.Close()
		}
	}
	return proxy, nil
}

// readReports reads a stage's reports, with the descriptors that came with
// each, until the stage's end closes (it exec'd) or do fails.
func readReports(f *os.File, do func(stageReport, []*os.File) error) error {
	fd := int(f.Fd()) // blocking: the keeper has nothing else to do meanwhile
	var (
		pending []byte
		files   []*os.File
		buf     = make([]byte, 4096)
		oob     = make([]byte, unix.CmsgSpace(16*4))
	)
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("keeper: read the stage: %w", err)
		}
		if oobn > 0 {
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), "listener"))
				}
			}
		}
		if n == 0 && oobn == 0 {
			for _, f := range files {
				f.Close()
			}
			return nil // end of file: the executor runs
		}
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			var r stageReport
			line := pending[:i]
			pending = pending[i+1:]
			if err := json.Unmarshal(line, &r); err != nil {
				return fmt.Errorf("keeper: the stage said %q", line)
			}
			got := files
			files = nil
			if err := do(r, got); err != nil {
				return err
			}
		}
	}
}

// stage is a stage's life; it returns only when it could not exec the
// executor (its exit code).
func stage() int {
	syscall.CloseOnExec(3)
	ctl := os.NewFile(3, "stage socket")
	// Every step that is the thread's own (capabilities, no_new_privs,
	// Landlock) happens on the thread that execs.
	runtime.LockOSThread()
	report := func(r stageReport, fds ...int) {
		b, _ := json.Marshal(r)
		_ = unix.Sendmsg(3, append(b, '\n'), unix.UnixRights(fds...), nil, 0)
	}
	fail := func(err error) int {
		r := stageReport{Error: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r.Errno = int(errno)
		}
		report(r)
		return 1
	}
	line, err := bufio.NewReader(ctl).ReadBytes('\n')
	if err != nil {
		return 2
	}
	var s stageSpec
	if err := json.Unmarshal(line, &s); err != nil {
		return fail(fmt.Errorf("keeper: stage: %w", err))
	}
	env := s.Env
	if s.Net {
		l, fds, err := listen(s.Forward)
		if err != nil {
			return fail(err)
		}
		report(stageReport{Listen: &l}, fds...)
		for _, fd := range fds {
			unix.Close(fd)
		}
		env = proxyEnv(env, l.Proxy)
	}
	// The rules are made while the stage still reaches every path they
	// name (root lists /root to cut a denied ~/.ssh out of it), and
	// applied once it is the task's user.
	var rules *landlock.Ruleset
	if s.Policy != nil {
		if rules, err = landlock.Prepare(*s.Policy); err != nil {
			return fail(fmt.Errorf("confine the attempt: %w", err))
		}
	}
	if err := dropPrivileges(s.User, s.DropCaps); err != nil {
		return fail(err)
	}
	if rules != nil {
		if _, err := rules.RestrictThread(); err != nil {
			return fail(fmt.Errorf("confine the attempt: %w", err))
		}
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("keeper: no_new_privs: %w", err))
	}
	if s.Dir != "" {
		if err := syscall.Chdir(s.Dir); err != nil {
			return fail(&os.PathError{Op: "chdir", Path: s.Dir, Err: err})
		}
	}
	err = syscall.Exec(s.Path, s.Args, env)
	return fail(&os.PathError{Op: "fork/exec", Path: s.Path, Err: err})
}

// listen sets the namespace's loopback up and listens on it: the proxy on
// a port of the kernel's choosing, each forward on its own port. It
// returns the listeners' descriptors, the proxy's first.
func listen(forward []int) (listening, []int, error) {
	if err := loopbackUp(); err != nil {
		return listening{}, nil, err
	}
	var (
		l   listening
		fds []int
	)
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	// The forwards first, so that the proxy's port is none of theirs.
	for _, port := range forward {
		fd, _, err := listenFD(port)
		if err != nil {
			closeAll()
			return listening{}, nil, err
		}
		fds = append(fds, fd)
		l.Forward = append(l.Forward, port)
	}
	fd, port, err := listenFD(0)
	if err != nil {
		closeAll()
		return listening{}, nil, err
	}
	l.Proxy = port
	return l, append([]int{fd}, fds...), nil
}

// listenFD listens on 127.0.0.1:port and returns the socket and its port.
func listenFD(port int) (int, int, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return 0, 0, fmt.Errorf("keeper: listen in the attempt's network: %w", err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return 0, 0, fmt.Errorf("keeper: listen in the attempt's network: %w", err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("keeper: listen in the attempt's network: %w", err)
	}
	unix.CloseOnExec(fd)
	return fd, ln.Addr().(*net.TCPAddr).Port, nil
}

// loopbackUp sets the network namespace's loopback interface up: a new
// namespace has it down, without an address.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("keeper: set loopback up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("keeper: set loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("keeper: set loopback up: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("keeper: set loopback up: %w", err)
	}
	return nil
}

// proxyEnv sets the proxy variables every HTTP client reads (curl reads
// only the lower-case http_proxy) to the attempt's proxy; loopback goes
// direct, to the forwards.
func proxyEnv(env []string, port int) []string {
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	set := map[string]string{
		"HTTPS_PROXY": url, "https_proxy": url, "HTTP_PROXY": url, "http_proxy": url,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; !ok && name != "ALL_PROXY" && name != "all_proxy" {
			out = append(out, kv)
		}
	}
	for _, name := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"} {
		out = append(out, name+"="+set[name])
	}
	return out
}

// The securebits (linux/securebits.h): root is not special on exec, and
// none of it can be undone.
const (
	secbitNoroot                  = 1 << 0
	secbitNorootLocked            = 1 << 1
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7
)

// dropPrivileges gives up what the stage holds before it execs the
// executor, on this thread: its ambient capabilities (the one a user
// namespace left it to set loopback up); with dropCaps (a root agent),
// every capability, for good (the bounding set, and root no longer
// special on exec); then it becomes user, when set.
func dropPrivileges(user *User, dropCaps bool) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("keeper: clear ambient capabilities: %w", err)
	}
	if dropCaps {
		for c := 0; c <= 63; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); errors.Is(err, unix.EINVAL) {
				break // past the last capability the kernel knows
			} else if err != nil {
				return fmt.Errorf("keeper: drop capability %d: %w", c, err)
			}
		}
		bits := secbitNoroot | secbitNorootLocked | secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
			return fmt.Errorf("keeper: securebits: %w", err)
		}
	}
	if user != nil {
		groups := make([]int, len(user.Groups))
		for i, g := range user.Groups {
			groups[i] = int(g)
		}
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("keeper: task user: groups: %w", err)
		}
		if err := syscall.Setresgid(int(user.Gid), int(user.Gid), int(user.Gid)); err != nil {
			return fmt.Errorf("keeper: task user: gid %d: %w", user.Gid, err)
		}
		if err := syscall.Setresuid(int(user.Uid), int(user.Uid), int(user.Uid)); err != nil {
			return fmt.Errorf("keeper: task user: uid %d: %w", user.Uid, err)
		}
	}
	if dropCaps {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("keeper: drop capabilities: %w", err)
		}
	}
	return nil
}

// probe checks, in a process started as a stage with a network namespace
// would be, that loopback can be set up and listened on.
func probe() int {
	if _, _, err := listen(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// ProbeEgress says whether attempts can run in a network namespace of
// their own here, or why not, in words an operator can act on.
func ProbeEgress() error {
	if !canKeep {
		return ErrNotKeeper
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{probeArg0}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	netnsAttr(cmd.SysProcAttr)
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EINVAL):
		if os.Geteuid() == 0 {
			return fmt.Errorf("the kernel does not let this process make a network namespace (%v): a container without CAP_SYS_ADMIN, or a seccomp filter refusing unshare", err)
		}
		return fmt.Errorf("the kernel does not let this user make a user and network namespace (%v): unprivileged user namespaces are off (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns) or a seccomp filter refuses them", err)
	case len(out) > 0:
		return fmt.Errorf("%s", strings.TrimSpace(string(out)))
	}
	return err
}
