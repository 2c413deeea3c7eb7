package settings

import (
	"strconv"

	"github.com/edgeagent/agent/internal/bytesize"
)

// ByteSize is a setting in bytes, written as a count of bytes (4096) or
// with a unit: KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB
// (powers of 1000), case aside.
type ByteSize int64

// String writes the size in the largest unit that holds it whole, binary
// units first.
func (b ByteSize) String() string {
	for _, u := range bytesize.Units[:len(bytesize.Units)-1] {
		if b != 0 && int64(b)%u.N == 0 {
			return strconv.FormatInt(int64(b)/u.N, 10) + u.Name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// Set implements pflag.Value.
func (b *ByteSize) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*b = n
	return nil
}

// Type implements pflag.Value.
func (b *ByteSize) Type() string { return "size" }

// ParseSize reads a size as ByteSize.Set does.
func ParseSize(s string) (ByteSize, error) {
	n, err := bytesize.Parse(s)
	return ByteSize(n), err
}
