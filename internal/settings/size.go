package settings

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSize is a setting in bytes, written as a count of bytes (4096) or
// with a unit: KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB
// (powers of 1000), case aside.
type ByteSize int64

var sizeUnits = []struct {
	name string
	n    int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// String writes the size in the largest unit that holds it whole, binary
// units first.
func (b ByteSize) String() string {
	for _, u := range sizeUnits[:len(sizeUnits)-1] {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.name
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
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' })
	unit := strings.TrimSpace(t[len(num):])
	num = strings.TrimSpace(num)
	mult := int64(1)
	if unit != "" {
		mult = 0
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult = u.n
			}
		}
		if mult == 0 {
			return 0, fmt.Errorf("size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, unit)
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, e.g. 4096, 512KiB or 10GiB", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n * mult), nil
}
