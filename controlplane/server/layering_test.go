package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon, its metrics and the client do not link the reference
// server: only the command line does. (The agent runs on workstations;
// the server, its store and its crash points have no business there.)
func TestOnlyTheCommandLineLinksTheServer(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	const self = "github.com/edgeagent/agent/controlplane/server"
	for _, pkg := range []string{"agent", "metrics", "controlplane", "controlplane/api"} {
		out, err := exec.Command(goBin, "list", "-deps", "github.com/edgeagent/agent/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == self || strings.HasPrefix(dep, self+"/") {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}

// The Server is the HTTP layer on top of its rooms (doc.go): what changes
// a task is the rules', which take no HTTP request and write no
// response, and the Server stays thin.
func TestServerIsTheHTTPLayerOverItsRooms(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			recv := types.ExprString(fd.Recv.List[0].Type)
			methods[recv]++
			if recv != "*rules" {
				continue
			}
			for _, p := range fd.Type.Params.List {
				if typ := types.ExprString(p.Type); strings.HasPrefix(strings.TrimPrefix(typ, "*"), "http.") {
					t.Errorf("%s: rules.%s takes an %s: the rules know nothing of HTTP", fset.Position(fd.Pos()), fd.Name.Name, typ)
				}
			}
		}
	}
	if n := methods["*Server"]; n >= 40 {
		t.Errorf("*Server has %d methods: keep it the thin HTTP layer (under 40), its work in the rooms (rules, dispatch, watchdog)", n)
	}
	for _, room := range []string{"*rules", "*dispatch", "*watchdog", "consoleBackend"} {
		if methods[room] == 0 {
			t.Errorf("no methods on %s", room)
		}
	}
}
