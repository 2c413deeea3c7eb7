package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestSampleExecutorFollowsDirectives(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(attempt, prompt string) (string, int) {
		cmd := agentCmd(ctx, []string{"AGENT_ATTEMPT=" + attempt}, "sample-executor")
		cmd.Stdin = strings.NewReader(`{"id":"t-1","prompt":"` + prompt + `"}` + "\n")
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Run()
		return out.String(), cmd.ProcessState.ExitCode()
	}
	out, code := run("1", `@tool grep\n@fail rate_limit 1`)
	if code != 1 || !strings.Contains(out, `"stage":"call"`) || !strings.Contains(out, `"code":"rate_limit"`) {
		t.Errorf("attempt 1: exit %d\n%s", code, out)
	}
	out, code = run("2", `@tool grep\n@fail rate_limit 1`)
	if code != 0 || !strings.Contains(out, `"type":"result"`) {
		t.Errorf("attempt 2 must pass the @fail: exit %d\n%s", code, out)
	}
	if _, code := run("1", `@exit 7`); code != 7 {
		t.Errorf("@exit 7: exit %d", code)
	}
}
