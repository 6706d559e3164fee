package ops

// Exit codes of verify.
const (
	VerifyComplete    = 0 // every copied record is on the target unchanged and nothing is left to copy
	VerifyDifferences = 1 // records missing, extra or differing, or records not copied yet
	VerifyError       = 2 // the check could not be done
)
