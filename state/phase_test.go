package state

import (
	"errors"
	"testing"
)

func TestCheckTransition(t *testing.T) {
	legal := []struct{ from, to Phase }{
		{PhaseQueued, PhaseClaimed}, {PhaseQueued, PhaseCancelled}, {PhaseQueued, PhaseExpired}, {PhaseQueued, PhaseFailed},
		{PhaseClaimed, PhaseQueued}, {PhaseClaimed, PhaseExecutorStarting},
		{PhaseExecutorStarting, PhaseTurnStarted}, {PhaseTurnStarted, PhaseAwaitingReply},
		{PhaseAwaitingReply, PhaseTurnStarted}, {PhaseAwaitingReply, PhaseCompleting}, {PhaseTurnStarted, PhaseCompleting},
		{PhaseCompleting, PhaseExecutorStarting}, {PhaseTurnStarted, PhaseExecutorStarting}, // a new attempt
		{PhaseCompleting, PhaseCompleted}, {PhaseTurnStarted, PhaseFailed}, {PhaseClaimed, PhaseRecoverableFailed},
		{PhaseAwaitingReply, PhaseTimedOut}, {PhaseExecutorStarting, PhaseCancelled},
		{PhaseCompleted, PhaseCompleted}, {PhaseTurnStarted, PhaseTurnStarted}, // staying put changes nothing
	}
	for _, c := range legal {
		if err := checkTransition(c.from, c.to); err != nil {
			t.Errorf("%s → %s: %v", c.from, c.to, err)
		}
	}
	illegal := []struct {
		from, to Phase
		want     error
	}{
		{PhaseQueued, PhaseTurnStarted, ErrTransition}, {PhaseQueued, PhaseCompleted, ErrTransition},
		{PhaseTurnStarted, PhaseClaimed, ErrTransition}, {PhaseTurnStarted, PhaseQueued, ErrTransition},
		{PhaseCompleting, PhaseAwaitingReply, ErrTransition}, {PhaseTurnStarted, PhaseExpired, ErrTransition},
		{PhaseClaimed, "paused", ErrTransition},
	}
	for _, terminal := range []Phase{PhaseCompleted, PhaseFailed, PhaseRecoverableFailed, PhaseTimedOut, PhaseCancelled, PhaseExpired} {
		for _, to := range Phases {
			if to != terminal {
				illegal = append(illegal, struct {
					from, to Phase
					want     error
				}{terminal, to, ErrTerminal})
			}
		}
	}
	for _, c := range illegal {
		if err := checkTransition(c.from, c.to); !errors.Is(err, c.want) {
			t.Errorf("%s → %s: %v, want %v", c.from, c.to, err, c.want)
		}
	}
}

func TestPhasePredicates(t *testing.T) {
	for _, p := range Phases {
		if !p.Valid() {
			t.Errorf("%s not valid", p)
		}
		if p.Terminal() == p.Running() && p != PhaseQueued {
			t.Errorf("%s: terminal %v, running %v", p, p.Terminal(), p.Running())
		}
	}
	if PhaseQueued.Running() || PhaseQueued.Terminal() || Phase("x").Valid() {
		t.Error("queued or an unknown phase misclassified")
	}
	if PhaseExecutorStarting.TurnStarted() || !PhaseAwaitingReply.TurnStarted() {
		t.Error("TurnStarted misclassified")
	}
}
