package codex

import (
	"encoding/json"
	"testing"

	"github.com/edgeagent/agent/state"
)

// A continued thread's totals hold its earlier turns: the attempt's usage
// is what the thread gained from its first request on.
func TestCodexUsageIsTheAttemptsShareOfTheThread(t *testing.T) {
	s := &codexSession{}
	report := func(total, last [3]int64) (state.Usage, bool) {
		b, _ := json.Marshal(map[string]any{
			"total": map[string]int64{"inputTokens": total[0], "outputTokens": total[1], "totalTokens": total[2], "cachedInputTokens": 0},
			"last":  map[string]int64{"inputTokens": last[0], "outputTokens": last[1], "totalTokens": last[2]},
		})
		return s.attemptUsage(b)
	}
	// The thread used 1000 in and 100 out before this attempt.
	if u, ok := report([3]int64{1020, 107, 1127}, [3]int64{20, 7, 27}); !ok || u != (state.Usage{InputTokens: 20, OutputTokens: 7, TotalTokens: 27}) {
		t.Errorf("first report: %+v %v", u, ok)
	}
	if u, ok := report([3]int64{1020, 107, 1127}, [3]int64{20, 7, 27}); ok {
		t.Errorf("the same report again says something new: %+v", u)
	}
	if u, ok := report([3]int64{1060, 115, 1175}, [3]int64{40, 8, 48}); !ok || u != (state.Usage{InputTokens: 60, OutputTokens: 15, TotalTokens: 75}) {
		t.Errorf("second report: %+v %v", u, ok)
	}
	if _, ok := s.attemptUsage(json.RawMessage(`"not usage"`)); ok {
		t.Error("a report that is not usage was taken")
	}
}
