package proc

import (
	"github.com/edgeagent/agent/internal/testkit"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchEvent is an executor's event line as the exec protocol has it, of
// a usual size.
const benchEvent = `{"type":"progress","message":"running go test ./... in the work directory","percent":42}`

// cpuTime is the processor time this process and its reaped children
// have used.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

// BenchmarkSpoolPerEvent measures, in one run, what an event costs from
// the executor's write to the agent's line reader: today's path (the
// executor's stdout a pipe to the agent, its keeper aside) and the spool
// (the keeper reads the pipe, appends to the spool file, tells the agent
// the new size over its socket, and the agent reads the file and commits
// what it read every 256 KiB, which the keeper drops from the file). Each
// iteration runs an executor printing n events and one printing none
// through each path, so that what a process's start and end cost is taken
// off: ns/event is (t(n) - t(0)) / n, in wall time and in processor time
// (the agent's, its keeper's and the executor's: the executor's is the
// same on both paths). The ratios are spool/pipe.
func BenchmarkSpoolPerEvent(b *testing.B) {
	const n = 200000
	spoolRoot := b.TempDir()
	run := func(events int, spooled bool, i int) (wall, cpu time.Duration) {
		script := `yes '` + benchEvent + `' | head -n ` + strconv.Itoa(events)
		mark := NewMark("bench-owner", "att-"+strconv.Itoa(i))
		ps := Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Mark: mark, Grace: time.Second}
		if spooled {
			dir := filepath.Join(spoolRoot, strconv.Itoa(i)+"-"+strconv.Itoa(events))
			if err := os.Mkdir(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			ps.Spool = &Spool{Dir: dir, Reattach: time.Minute}
		}
		cpu0, start := cpuTime(), time.Now()
		p, err := Start(ps)
		if err != nil {
			b.Fatal(err)
		}
		var out io.Reader = p.Stdout
		if spooled {
			// As the agent does: what it read committed as it goes, so
			// that the keeper drops it and reads on.
			out = &committingReader{p: p, every: 256 << 10}
		}
		lr := NewLineReader(out, 64<<10)
		got := 0
		for {
			if _, err := lr.Next(); err != nil {
				break
			}
			got++
		}
		<-p.Exited()
		wall = time.Since(start)
		if got != events {
			b.Fatalf("read %d events of %d", got, events)
		}
		p.Release()
		p.Stdout.Close()
		p.Stderr.Close()
		// The keeper's exit, reaped: its time counted.
		testkit.WaitFor(b, "the keeper's exit, reaped", func() bool { return len(OwnerProcesses("bench-owner")) == 0 })
		return wall, cpuTime() - cpu0
	}
	var pipeWall, pipeCPU, spoolWall, spoolCPU time.Duration
	i := 0
	for b.Loop() {
		i++
		w0, c0 := run(0, false, i)
		w, c := run(n, false, i)
		pipeWall, pipeCPU = pipeWall+w-w0, pipeCPU+c-c0
		w0, c0 = run(0, true, i)
		w, c = run(n, true, i)
		spoolWall, spoolCPU = spoolWall+w-w0, spoolCPU+c-c0
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i*n) }
	b.ReportMetric(per(pipeWall), "pipe-ns/event")
	b.ReportMetric(per(spoolWall), "spool-ns/event")
	b.ReportMetric(per(spoolWall)/per(pipeWall), "spool/pipe")
	b.ReportMetric(per(pipeCPU), "pipe-cpu-ns/event")
	b.ReportMetric(per(spoolCPU), "spool-cpu-ns/event")
	b.ReportMetric(per(spoolCPU)/per(pipeCPU), "spool/pipe-cpu")
}
