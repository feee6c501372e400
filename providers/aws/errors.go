package aws

import (
	"errors"

	"github.com/aws/smithy-go"
)

// apiCode returns the AWS error code of err, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isCode reports whether err is an AWS error with one of codes.
func isCode(err error, codes ...string) bool {
	c := apiCode(err)
	for _, want := range codes {
		if c == want {
			return true
		}
	}
	return false
}
