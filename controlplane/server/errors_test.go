package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// Each kind of refusal the rules make is answered with the status it was
// answered with when the rules said statuses themselves: clients and the
// console read them.
func TestEachKindOfRefusalKeepsItsStatus(t *testing.T) {
	for kind, status := range map[errKind]int{
		errInvalid:      http.StatusBadRequest,
		errUnauthorized: http.StatusUnauthorized,
		errForbidden:    http.StatusForbidden,
		errNotFound:     http.StatusNotFound,
		errConflict:     http.StatusConflict,
		errGone:         http.StatusGone,
		errUnserved:     http.StatusUnprocessableEntity,
		errUnavailable:  http.StatusServiceUnavailable,
	} {
		if got := statusFor(kind); got != status {
			t.Errorf("statusFor(%d) = %d, want %d", kind, got, status)
		}
	}
	if got := statusFor(0); got != http.StatusInternalServerError {
		t.Errorf("statusFor(0) = %d, want 500", got)
	}
	// A refusal wrapped on its way up is still said with its status and
	// its own line.
	err := fmt.Errorf("claim: %w", invalidRequest("wait_ms is %d", -1))
	var re *ruleError
	if !errors.As(err, &re) || statusFor(re.kind) != http.StatusBadRequest || re.msg != "wait_ms is -1" {
		t.Errorf("a wrapped refusal: %v", err)
	}
}
