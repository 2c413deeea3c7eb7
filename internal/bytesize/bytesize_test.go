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

func TestParse(t *testing.T) {
	for s, want := range map[string]int64{
		"4096": 4096, "0": 0, "512KiB": 512 << 10, "10 GiB": 10 << 30, "1mib": 1 << 20, "2TiB": 2 << 40,
		"3KB": 3000, "5GB": 5e9, "7B": 7, " 8 MB ": 8e6,
	} {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %d %v, want %d", s, got, err, want)
		}
	}
	for s, want := range map[string]string{
		"8X":          `size "8X": unknown unit "X" (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)`,
		"-1":          `size "-1": want a whole number of bytes, e.g. 4096, 512KiB or 10GiB`,
		"GiB":         `size "GiB": want a whole number of bytes, e.g. 4096, 512KiB or 10GiB`,
		"1.5GiB":      `size "1.5GiB": want a whole number of bytes, e.g. 4096, 512KiB or 10GiB`,
		"9000000TiB":  `size "9000000TiB" is too large`,
		"1G\nExecX=1": `size "1G\nExecX=1": want a whole number of bytes, e.g. 4096, 512KiB or 10GiB`,
	} {
		if _, err := Parse(s); err == nil || err.Error() != want {
			t.Errorf("Parse(%q): %v, want %s", s, err, want)
		}
	}
}

func TestTenths(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3277: "3.2 KiB", 3 << 29: "1.5 GiB", 1 << 60: "1.0 EiB"} {
		if got := Tenths(n); got != want {
			t.Errorf("Tenths(%d) = %q, want %q", n, got, want)
		}
	}
}
