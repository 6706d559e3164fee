// Package doccheck holds the tests that keep the user documentation true without brokers:
// every MM2_* name a page gives is a setting of some function's -h; each function's -h lists
// only the settings its code reads; the exit-code and summary reference is generated from
// the tables in code, and every exit code a sub-command's -h gives is in it; every MM2_* name
// the code knows is listed by some -h; every measured figure comes from a results file or
// carries its date and run. Regenerate the generated parts with MM2GO_UPDATE_DOCS=1 go test ./test/doccheck.
package doccheck
