// Package apidoc holds the check of the public packages' documentation: its
// test fails when a public package's doc does not show its common call, or
// an exported name has no doc comment.
package apidoc
