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
