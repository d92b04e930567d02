package siteid

// View is a wrapper's answer at /site, which its peers ask who leads when
// they cannot read the Lease.
type View struct {
	// Leader is the identity of the wrapper this one reads from, or its own
	// while it leads; empty when it has none.
	Leader  string   `json:"leader,omitempty"`
	Members []string `json:"members,omitempty"`
}
