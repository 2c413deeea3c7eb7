package outbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// jsonValidCases are inputs at the edges of the grammar, each checked
// against encoding/json's answer (and seeds of FuzzValidJSON).
var jsonValidCases = []string{
	``, ` `, `{}`, `[]`, ` {} `, "\t\n\r[]\n", `{`, `}`, `[`, `]`, `[}`, `{]`,
	`{"a":1}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":1,"b":[1,2,{"c":null}]}`,
	`[1,]`, `[,1]`, `[1 2]`, `[[[]]]`, `[[[]]`, `[]]`, `{} {}`, `[] x`, `1 2`,
	`0`, `-0`, `-`, `01`, `-01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e+5`, `1E-0`, `1.5e3`, `-1.0e-10`, `+1`, `0x10`, `1_000`, `00`,
	`true`, `false`, `null`, `tru`, `nul`, `True`, `nulll`, `truefalse`,
	`""`, `"a"`, `"`, `"a`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u12"`, `"\x"`, `"\'"`,
	"\"tab\there\"", "\"nl\nhere\"", "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\xfe\"", "\"é\"", "\xef\xbb\xbf{}",
	"{\n\"a\": [1,\r\n2]\n}\n", "[1,\r2]", "\n1", "1\r", "\"a\nb\"", "\"a\rb\"", "{\"a\":\"x\\n\"}",
	`"` + strings.Repeat("abcdefgh", 40) + `"`, `"` + strings.Repeat("abcdefg\\n", 40) + `"`, `"` + strings.Repeat("x", 13) + "\x01" + `"`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 9999) + `{}` + strings.Repeat("}", 9999),
	strings.Repeat(`{"a":`, 10000) + `{}` + strings.Repeat("}", 10000),
	strings.Repeat(`[{"a":`, 40) + `1` + strings.Repeat("}]", 40),
	strings.Repeat(`[{"a":`, 40) + `1` + strings.Repeat("]}", 40),
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, c := range jsonValidCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.60q) = %v, encoding/json says %v", c, got, want)
		}
		checkBreaks(t, []byte(c))
	}
}

// checkBreaks holds validJSONLine to what a valid b holds: a newline or a
// carriage return anywhere in it (whitespace, since a string cannot hold
// one) is reported.
func checkBreaks(t *testing.T, b []byte) {
	t.Helper()
	valid, breaks := validJSONLine(b)
	if valid != validJSON(b) {
		t.Fatalf("validJSONLine(%.60q) says valid %v, validJSON %v", b, valid, !valid)
	}
	if want := strings.ContainsAny(string(b), "\n\r"); valid && breaks != want {
		t.Errorf("validJSONLine(%.60q) says line breaks %v, want %v", b, breaks, want)
	}
}

// TestPlainRunFindsTheFirstSpecialByte holds the word-at-a-time scan to a
// byte-at-a-time one. Every byte value, special or not, ends a run of
// plain bytes of every length from every start, and the plain bytes are
// those where the bit tricks could go wrong: neighbours of the special
// ones, 0x7f, and 0x80 and above, whose high bit the tests mask. Then
// rapid mixes special and plain bytes, so that borrows from one special
// byte run through the others.
func TestPlainRunFindsTheFirstSpecialByte(t *testing.T) {
	t.Parallel()
	check := func(t interface{ Fatalf(string, ...any) }, b []byte, i int) {
		want := i
		for want < len(b) && b[want] >= 0x20 && b[want] != '"' && b[want] != '\\' {
			want++
		}
		if got := plainRun(b, i); got != want {
			t.Fatalf("plainRun(%q, %d) = %d, want %d", b, i, got, want)
		}
	}
	fill := []byte{0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0x9f, 0xa0, 0xa2, 0xdc, 0xff, 'x'}
	for c := range 256 {
		for n := range 40 {
			b := make([]byte, 0, n+2)
			for k := range n {
				b = append(b, fill[(k+c)%len(fill)])
			}
			b = append(b, byte(c), 0)
			for i := range n + 1 {
				check(t, b, i)
			}
		}
	}
	special := []byte{0x00, 0x01, 0x1f, '"', '\\'}
	rapid.Check(t, func(t *rapid.T) {
		var b []byte
		for range rapid.IntRange(0, 6).Draw(t, "runs") {
			for range rapid.IntRange(0, 20).Draw(t, "run") {
				b = append(b, rapid.SampledFrom(fill).Draw(t, "plain"))
			}
			b = append(b, rapid.SampledFrom(special).Draw(t, "special"))
		}
		check(t, b, rapid.IntRange(0, len(b)).Draw(t, "i"))
	})
}

// FuzzValidJSON holds validJSON to encoding/json's answer on any input.
func FuzzValidJSON(f *testing.F) {
	for _, c := range jsonValidCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Add([]byte(`{"kind":"progress","payload":{"n":1,"s":"x\u0041","a":[true,false,null,-1.5e-3]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
		checkBreaks(t, b)
	})
}

func BenchmarkValidJSON(b *testing.B) {
	for _, size := range benchPayloads {
		p := benchPayload(size)
		mixed := []byte(`{"type":"output","text":"` + strings.Repeat(`line of output \"quoted\"\n`, size/26) + `","n":[1,2.5,-3e2,true,null]}`)
		for _, c := range []struct {
			name string
			fn   func([]byte) bool
		}{{"validJSON", validJSON}, {"encoding-json", json.Valid}} {
			for _, in := range []struct {
				name string
				b    []byte
			}{{"plain", p}, {"escaped", mixed}} {
				b.Run(fmt.Sprintf("%s/%s/%d", c.name, in.name, size), func(b *testing.B) {
					b.SetBytes(int64(len(in.b)))
					for b.Loop() {
						if !c.fn(in.b) {
							b.Fatal("invalid")
						}
					}
				})
			}
		}
	}
}
