package mockmodel

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// The usage_limit scenario answers each API's 429, saying when the limit
// resets, until it resets; then the same request is answered as text.
// The clock is the mock's: the test sets the reset in the past to pass it.
func TestUsageLimitResets(t *testing.T) {
	m := startTestMock(t)
	m.UsageLimitReset = time.Hour
	ctx := context.Background()
	openai := `{"model":"gpt-5.5","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi\nmock: usage_limit"}]}]}`
	anthropic := `{"model":"claude-x","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi\nmock: usage_limit"}]}`

	resp, err := post(t, ctx, m.URL()+"/v1/responses", openai)
	must(t, err)
	var body struct {
		Error struct {
			Type     string `json:"type"`
			ResetsAt int64  `json:"resets_at"`
		} `json:"error"`
	}
	must(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	resets := m.LimitResets()
	if resp.StatusCode != http.StatusTooManyRequests || body.Error.Type != "usage_limit_reached" || body.Error.ResetsAt != resets.Unix() ||
		resp.Header.Get("X-Codex-Primary-Used-Percent") != "100.0" || resp.Header.Get("X-Codex-Primary-Reset-At") != strconv.FormatInt(resets.Unix(), 10) {
		t.Errorf("openai: %d %+v %v", resp.StatusCode, body, resp.Header)
	}
	resp, err = post(t, ctx, m.URL()+"/v1/messages", anthropic)
	must(t, err)
	resp.Body.Close()
	if after, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || after < 3500 ||
		resp.Header.Get("Anthropic-Ratelimit-Unified-Status") != "rejected" || resp.Header.Get("Anthropic-Ratelimit-Unified-Reset") != strconv.FormatInt(resets.Unix(), 10) {
		t.Errorf("anthropic: %d %v", resp.StatusCode, resp.Header)
	}

	m.mu.Lock()
	m.limitResets = time.Now().Add(-time.Second) // the limit reset
	m.mu.Unlock()
	for _, c := range []struct{ path, body string }{{"/v1/responses", openai}, {"/v1/messages", anthropic}} {
		resp, err := post(t, ctx, m.URL()+c.path, c.body)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s after the reset: %d", c.path, resp.StatusCode)
		}
	}
	reqs := m.Requests()
	if len(reqs) != 4 || reqs[0].Scenario != ScenarioUsageLimit || reqs[3].Scenario != ScenarioText {
		t.Errorf("requests: %+v", reqs)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
