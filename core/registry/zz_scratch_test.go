package registry
import "testing"
func TestScratch(t *testing.T){
 for _, s := range []string{`{"a":1} trailing`, `{"a":"<b>&"}`, `1e400`, `"\u00e9"`} {
  t.Logf("%q -> %s", s, canonicalJSON([]byte(s)))
 }
}
