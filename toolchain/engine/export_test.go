package engine

// LoadReference loads a program with every fast path disabled: the
// differential tests (package engine_test) compare its output with Load's.
func LoadReference(jsonText []byte, opts Options) (*Pipeline, error) {
	return load(jsonText, opts, true)
}
