package outbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
	`"` + strings.Repeat("abcdefgh", 40) + `"`, `"` + strings.Repeat("abcdefg\\n", 40) + `"`, `"` + strings.Repeat("x", 13) + "\x01" + `"`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 9999) + `{}` + strings.Repeat("}", 9999),
	strings.Repeat(`{"a":`, 10000) + `{}` + strings.Repeat("}", 10000),
	strings.Repeat(`[{"a":`, 40) + `1` + strings.Repeat("}]", 40),
	strings.Repeat(`[{"a":`, 40) + `1` + strings.Repeat("]}", 40),
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range jsonValidCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.60q) = %v, encoding/json says %v", c, got, want)
		}
	}
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
