package outbox

import (
	"encoding/binary"
	"math/bits"
)

// validJSON reports whether b is exactly one JSON value, optionally
// surrounded by whitespace: the same answer as encoding/json's Valid (which
// accepts any bytes of 0x20 and above inside strings, valid UTF-8 or not,
// and nests at most 10,000 deep), found several times faster. Every record
// is validated when it is appended, when the outbox opens and when it is
// read for the wire, and encoding/json's scanner, a function call per
// byte, was most of the CPU an append of a 4 KiB record cost.
// FuzzValidJSON holds the two to the same answers.
func validJSON(b []byte) bool {
	valid, _ := validJSONLine(b)
	return valid
}

// validJSONLine is validJSON that also tells whether b holds a newline
// or a carriage return, which in valid JSON can only be whitespace
// between tokens: the one scan answers both.
func validJSONLine(b []byte) (valid, breaks bool) {
	v := jsonValidator{b: b}
	return v.valid(), v.breaks
}

// maxJSONDepth is encoding/json's limit on nesting.
const maxJSONDepth = 10000

type jsonValidator struct {
	b []byte
	i int
	// open holds, for each container the scan is in, whether it is an
	// object; the first 64 live in a bit set, deeper ones in more.
	open  uint64
	more  []bool
	depth int
	// breaks is set when whitespace held a newline or a carriage return.
	breaks bool
}

func (v *jsonValidator) push(object bool) bool {
	if v.depth == maxJSONDepth {
		return false
	}
	if v.depth < 64 {
		if object {
			v.open |= 1 << v.depth
		} else {
			v.open &^= 1 << v.depth
		}
	} else {
		v.more = append(v.more[:v.depth-64], object)
	}
	v.depth++
	return true
}

// inObject reports whether the innermost open container is an object.
func (v *jsonValidator) inObject() bool {
	d := v.depth - 1
	if d < 64 {
		return v.open&(1<<d) != 0
	}
	return v.more[d-64]
}

func (v *jsonValidator) valid() bool {
	b := v.b
	for {
		// A value.
		v.space()
		if v.i >= len(b) {
			return false
		}
		switch c := b[v.i]; {
		case c == '{', c == '[':
			// Pushed even when empty: encoding/json counts "{}" as a level.
			object := c == '{'
			if !v.push(object) {
				return false
			}
			v.i++
			v.space()
			if v.i < len(b) && (object && b[v.i] == '}' || !object && b[v.i] == ']') {
				v.i++
				v.depth--
				break
			}
			if object && !v.key() {
				return false
			}
			continue
		case c == '"':
			if !v.str() {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if !v.number() {
				return false
			}
		case c == 't':
			if !v.word("true") {
				return false
			}
		case c == 'f':
			if !v.word("false") {
				return false
			}
		case c == 'n':
			if !v.word("null") {
				return false
			}
		default:
			return false
		}
		// After a value: close what it ends, then a comma or the end.
		for {
			v.space()
			if v.depth == 0 {
				return v.i == len(b)
			}
			if v.i >= len(b) {
				return false
			}
			c := b[v.i]
			v.i++
			object := v.inObject()
			switch {
			case c == ',' && object:
				v.space()
				if !v.key() {
					return false
				}
			case c == ',':
			case c == '}' && object, c == ']' && !object:
				v.depth--
				continue
			default:
				return false
			}
			break
		}
	}
}

// key scans an object member's name and its colon.
func (v *jsonValidator) key() bool {
	if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str() {
		return false
	}
	v.space()
	if v.i >= len(v.b) || v.b[v.i] != ':' {
		return false
	}
	v.i++
	return true
}

func (v *jsonValidator) space() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t':
			v.i++
		case '\n', '\r':
			v.breaks = true
			v.i++
		default:
			return
		}
	}
}

// plain marks the bytes a string holds as they are: none below 0x20, no
// quote, no backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str scans a string, its opening quote at v.i.
func (v *jsonValidator) str() bool {
	b := v.b
	i := v.i + 1
	for {
		i = plainRun(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '"':
			v.i = i + 1
			return true
		case '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !hex4(b[i+2:i+6]) {
					return false
				}
				i += 6
			default:
				return false
			}
		default: // a control byte
			return false
		}
	}
}

// plainRun returns the index of the first byte from i on that a string
// cannot hold as it is (a quote, a backslash, a control byte), or len(b).
// It looks at eight bytes at a time: in a word read little-endian, the
// lowest flag that special8 raises is the first such byte, exactly (a
// false flag can only follow a true one), so a run ends where the word
// says, without going back over it a byte at a time.
func plainRun(b []byte, i int) int {
	for ; i+16 <= len(b); i += 16 {
		w := b[i : i+16]
		m0 := special8(binary.LittleEndian.Uint64(w))
		m1 := special8(binary.LittleEndian.Uint64(w[8:]))
		if m0|m1 != 0 {
			if m0 != 0 {
				return i + bits.TrailingZeros64(m0)/8
			}
			return i + 8 + bits.TrailingZeros64(m1)/8
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// special8 flags, with the high bit of its byte, every byte of w that is
// below 0x20, a quote or a backslash; above the lowest flag, a flag may be
// false (a borrow). The tests are those of "Bit Twiddling Hacks": a byte
// of x is below n where (x - n·0x01…) &^ x has its high bit set, and zero
// where the same holds for n = 1. A quote or a backslash is a zero byte
// once w is XORed with it; the XOR keeps every high bit, so one &^ w
// serves all three.
func special8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (ones * '"')
	backslash := w ^ (ones * '\\')
	return ((w - ones*0x20) | (quote - ones) | (backslash - ones)) &^ w & highs
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (v *jsonValidator) number() bool {
	b := v.b
	i := v.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		i = digits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		i = digits(b, i)
	}
	v.i = i
	return true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func (v *jsonValidator) word(w string) bool {
	if len(v.b)-v.i < len(w) || string(v.b[v.i:v.i+len(w)]) != w {
		return false
	}
	v.i += len(w)
	return true
}
