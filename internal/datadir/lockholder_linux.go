package datadir

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelNamesLockHolder: Linux lists every file lock and its holder in
// /proc/locks.
const kernelNamesLockHolder = true

// lockHolder is the process holding the flock(2) write lock on the file
// at path, as /proc/locks names it: the file is matched by device and
// inode, so neither its name nor a file a task can write decides.
func lockHolder(path string) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, fmt.Errorf("the kernel's lock table: %w", err)
	}
	defer f.Close()
	return flockHolder(f, uint64(unix.Major(uint64(st.Dev))), uint64(unix.Minor(uint64(st.Dev))), st.Ino)
}

// errNoHolder: /proc/locks lists no write lock on the file.
var errNoHolder = errors.New("the kernel lists no write lock on it")

// flockHolder reads /proc/locks for the flock(2) write lock on the inode
// ino of device major:minor. A line is
//
//	1: FLOCK  ADVISORY  WRITE 1234 fe:00:9978545 0 EOF
//
// (device numbers in hex, the inode in decimal); a waiter's line has "->"
// after the ordinal and holds nothing. The pid is 0 when the holder is not
// visible from this pid namespace, or has exited leaving the lock to a
// child that inherited the descriptor.
func flockHolder(r io.Reader, major, minor, ino uint64) (int, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" || f[3] != "WRITE" {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		mnr, err2 := strconv.ParseUint(id[1], 16, 32)
		in, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || maj != major || mnr != minor || in != ino {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			return 0, fmt.Errorf("the kernel shows no process for its holder (pid %q: another pid namespace, or a child that inherited the lock)", f[4])
		}
		return pid, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("the kernel's lock table: %w", err)
	}
	return 0, errNoHolder
}

// signalLockHolder sends sig to pid if pid holds the lock at path. It
// goes through a pidfd: taken before the holder is checked again, it pins
// the process, so a pid that ends and is reused in between is never hit.
func signalLockHolder(path string, pid int, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.3: check, then kill
		if err := stillHolds(path, pid); err != nil {
			return err
		}
		return unix.Kill(pid, sig)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := stillHolds(path, pid); err != nil {
		return err
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

func stillHolds(path string, pid int) error {
	now, err := lockHolder(path)
	if err != nil {
		return fmt.Errorf("it no longer holds %s: %w", path, err)
	}
	if now != pid {
		return fmt.Errorf("it no longer holds %s (pid %d does)", path, now)
	}
	return nil
}
