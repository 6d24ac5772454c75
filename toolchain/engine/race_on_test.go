//go:build race

package engine

// raceDetector: built with -race, where sync.Pool drops items on purpose,
// so that allocation counts of the packet path are meaningless.
const raceDetector = true
