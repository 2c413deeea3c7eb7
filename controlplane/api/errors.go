package api

// ErrorBody is the body of every error answer (any status other than
// 2xx): one line that says what was wrong and, where it helps, what to do.
type ErrorBody struct {
	Error string `json:"error"`
}
