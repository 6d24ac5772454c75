// Package p4include carries the architecture files terrapin-p4c compiles
// against: core.p4 (the P4_16 core library) and v1model.p4 (BMv2
// simple_switch's architecture). They are the project's own text with the
// same declarations as p4lang's published files, embedded so that the
// compiler works from any directory with no installation step.
package p4include

import "embed"

// Files holds core.p4 and v1model.p4 at the root.
//
//go:embed core.p4 v1model.p4
var Files embed.FS
