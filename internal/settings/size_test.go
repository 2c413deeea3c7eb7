package settings

import (
	"strings"
	"testing"
)

func TestByteSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    ByteSize
		str     string
		wantErr string
	}{
		{"4096", 4096, "4KiB", ""},
		{"1000", 1000, "1KB", ""},
		{"123", 123, "123", ""},
		{"0", 0, "0", ""},
		{"512KiB", 512 << 10, "512KiB", ""},
		{"10 GiB", 10 << 30, "10GiB", ""},
		{"5gb", 5e9, "5GB", ""},
		{"1TiB", 1 << 40, "1TiB", ""},
		{"12XB", 0, "", `unknown unit "XB"`},
		{"-1", 0, "", "want a whole number"},
		{"1.5GiB", 0, "", "want a whole number"},
		{"99999999TiB", 0, "", "too large"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSize(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || got.String() != tc.str {
				t.Fatalf("ParseSize(%q) = %d (%s), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.str)
			}
			if back, err := ParseSize(got.String()); err != nil || back != got {
				t.Fatalf("%s does not read back: %d, %v", got, back, err)
			}
		})
	}
}
