package state

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// Every ErrorCode constant is in the one table that says what it means
// for a retry: a code added without its class fails here, not in a
// classification or a metric label that silently says "other".
func TestEveryErrorCodeIsInTheTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "decision.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "ErrorCode" {
				continue
			}
			for _, val := range v.Values {
				code, _ := strconv.Unquote(val.(*ast.BasicLit).Value)
				declared++
				if !ErrorCode(code).Known() {
					t.Errorf("ErrorCode %q is declared but not in errorCodes", code)
				}
			}
		}
	}
	if declared != len(errorCodes) {
		t.Errorf("%d codes declared, %d in the table", declared, len(errorCodes))
	}
}

// What the codes executors give say of a retry: the spec's lists.
func TestErrorCodesSayWhatTheSpecSays(t *testing.T) {
	for _, c := range []ErrorCode{CodeRateLimit, CodeOverloaded, CodeUnavailable, CodeTimeout, CodeGatewayTimeout, CodeNetwork} {
		if c.Retry() != RetryTransient {
			t.Errorf("%s: %d, want transient", c, c.Retry())
		}
	}
	for _, c := range []ErrorCode{CodeQuota, CodeAuth, CodeInvalidRequest, CodeContextOverflow, CodePermission} {
		if c.Retry() != RetryPermanent {
			t.Errorf("%s: %d, want permanent", c, c.Retry())
		}
	}
	for _, c := range []ErrorCode{CodeCancelled, CodeStdioClosed, "made-up"} {
		if c.Retry() != RetryUnsaid {
			t.Errorf("%s: %d, want unsaid", c, c.Retry())
		}
	}
	if ErrorCode("made-up").Known() {
		t.Error("a made-up code is known")
	}
}
