package promptlibrary

import "testing"

// Of promptLibrary only get is pure: the management methods change the
// store or answer from its current state.
func TestIsPureMethod(t *testing.T) {
	for m, want := range map[string]bool{
		MethodGet: true, MethodPublish: false, MethodList: false, MethodVersions: false,
		MethodResolve: false, MethodVerify: false, MethodReindex: false, "": false,
	} {
		if got := IsPureMethod(m); got != want {
			t.Errorf("IsPureMethod(%q) = %v, want %v", m, got, want)
		}
	}
}
