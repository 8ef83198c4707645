//go:build unix

package packmanifest

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO among the referenced files is refused at once as not a regular
// file: opening it must not wait for a writer that never comes.
func TestSchemaRefsToAFIFO(t *testing.T) {
	dir := refPack(t, map[string]string{"schemas/summarize.input.json": `{"properties": {"a": {"$ref": "pipe.json"}}}`})
	if err := syscall.Mkfifo(filepath.Join(dir, "schemas", "pipe.json"), 0o600); err != nil {
		t.Skip("no FIFOs:", err)
	}
	_, _, err := Load(dir)
	ps := problemsOf(t, err)
	if p, ok := at(ps, "schemas/summarize.input.json", "/properties/a/$ref"); !ok || p.Message != `"pipe.json": schemas/pipe.json is not a regular file` {
		t.Errorf("problems %+v, want the FIFO refused at the reference", ps)
	}
}
