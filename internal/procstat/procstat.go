// Package procstat reads a process's /proc/PID/stat line (Linux): the
// process sweep reads its children's, the metrics the agent's own.
package procstat

import (
	"bytes"
	"os"
	"strconv"
)

// Fields are the fields of a /proc/PID/stat line after the command's
// name, which may hold spaces and parentheses: they count from its last
// ')'.
type Fields [][]byte

// Read reads the stat line of pid, a number or "self".
func Read(pid string) (Fields, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, nil
	}
	return bytes.Fields(b[i+1:]), nil
}

// Field is field n as proc(5) numbers them (3 is the state), or nil when
// the line is shorter or n is the pid or the name.
func (f Fields) Field(n int) []byte {
	if i := n - 3; i >= 0 && i < len(f) {
		return f[i]
	}
	return nil
}

// Uint is field n as a number; false when it is missing or not one.
func (f Fields) Uint(n int) (uint64, bool) {
	v, err := strconv.ParseUint(string(f.Field(n)), 10, 64)
	return v, err == nil
}
