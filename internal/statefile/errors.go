package statefile

import "fmt"

// Error is why a state file was not read or not used. Reason is one of the
// Reason constants, a short word for log lines and tests; the components'
// own checks of a file's content use ReasonForeign and ReasonInvalid.
type Error struct {
	Path   string // "" when the content was checked apart from its file
	Reason string
	Err    error // the detail
}

func (e *Error) Error() string {
	msg := e.Reason
	if e.Path != "" {
		msg = e.Path + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an Error with reason and a formatted detail.
func Errorf(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Reasons a state file is not used.
const (
	ReasonMissing    = "missing"
	ReasonUnreadable = "unreadable"
	ReasonNotRegular = "not-regular-file"
	ReasonTooLarge   = "too-large"
	ReasonEmpty      = "empty"
	// ReasonTruncated: shorter (or longer) than its framing says.
	ReasonTruncated = "truncated"
	// ReasonCorrupt: the checksum does not match, or the content does not
	// decode.
	ReasonCorrupt = "corrupt"
	// ReasonUnknownFormat: not a framed state file at all.
	ReasonUnknownFormat = "unknown-format"
	// ReasonPreviousFormat: the file kind's earlier, unframed layout,
	// written by an older build; not read.
	ReasonPreviousFormat = "previous-format"
	// ReasonOtherKind: a framed state file of another kind.
	ReasonOtherKind = "other-kind"
	// ReasonVersion: the kind's layout in a version this build does not read.
	ReasonVersion = "unsupported-version"
	// ReasonForeign: written for another node, upstream or owner.
	ReasonForeign = "foreign"
	// ReasonInvalid: framed and decodable, but its content breaks a rule.
	ReasonInvalid = "invalid"
)
