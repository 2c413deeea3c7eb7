package workspace

import "testing"

func TestInfoRemoved(t *testing.T) {
	for _, c := range []struct {
		i    Info
		want string
	}{
		{Info{TaskID: "t-1", Dir: "/w/t-1"}, "removed the workspace of task t-1: /w/t-1"},
		{Info{TaskID: "t-1", Dir: "/w/t-1", Repo: "app", Branch: "agent/t-1", BranchHead: "abc"}, "removed the workspace of task t-1: /w/t-1 and branch agent/t-1 of app"},
		{Info{TaskID: "t-1", Dir: "/w/t-1", Base: "main", Commits: 2, Uncommitted: true, KeptRefs: []string{"refs/agent/kept/t-1/attempt-1"}},
			"removed the workspace of task t-1: /w/t-1, and what its replays kept (refs/agent/kept/t-1/attempt-1); dropped 2 commits not on main, uncommitted changes"},
	} {
		if got := c.i.Removed(); got != c.want {
			t.Errorf("Removed = %q\nwant      %q", got, c.want)
		}
	}
}
