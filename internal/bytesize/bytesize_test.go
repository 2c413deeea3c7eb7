package bytesize

import "testing"

func TestText(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {512 << 10, "512 KiB"}, {3 << 19, "1.5 MiB"}, {76 << 30, "76.0 GiB"},
	} {
		if got := Text(c.n); got != c.want {
			t.Errorf("Text(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
