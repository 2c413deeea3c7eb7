package proc

import (
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	in := "short\r\n" + strings.Repeat("y", 25) + "\nlast without newline"
	lr := NewLineReader(strings.NewReader(in), 10)
	var got []string
	for {
		l, err := lr.Next()
		if err == io.EOF {
			break
		}
		got = append(got, l)
	}
	want := []string{"short", "yyyyyyyyyy …[line cut: 15 more bytes]", "last witho …[line cut: 10 more bytes]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// Offset says where the next line starts, a cut line's dropped bytes
// counted, from where the reader began: where an agent takes up a spool.
func TestLineReaderOffset(t *testing.T) {
	in := "short\r\n" + strings.Repeat("y", 25) + "\nlast"
	lr := NewLineReaderAt(strings.NewReader(in), 10, 100)
	var offs []int64
	for {
		if _, err := lr.Next(); err == io.EOF {
			break
		}
		offs = append(offs, lr.Offset())
	}
	want := []int64{107, 133, 137}
	if len(offs) != 3 || offs[0] != want[0] || offs[1] != want[1] || offs[2] != want[2] {
		t.Errorf("offsets %v, want %v", offs, want)
	}
}
