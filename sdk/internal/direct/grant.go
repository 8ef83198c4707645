package direct

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/admission"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// KeyBytes is the length of a grant key.
const KeyBytes = 32

// NewKey returns a fresh grant key from crypto/rand.
func NewKey() []byte {
	k := make([]byte, KeyBytes)
	_, _ = rand.Read(k) // crypto/rand.Read never fails on supported platforms
	return k
}

// Sign returns the SignedGrant bytes of g under key, with a fresh nonce.
func Sign(key []byte, g *wophostv1.Grant) ([]byte, error) {
	if len(key) != KeyBytes {
		return nil, fmt.Errorf("grant key of %d bytes, want %d", len(key), KeyBytes)
	}
	g = proto.CloneOf(g)
	g.Nonce = make([]byte, 16)
	_, _ = rand.Read(g.Nonce)
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("encode grant: %w", err)
	}
	return proto.Marshal(&wophostv1.SignedGrant{Grant: body, Mac: mac(key, body)})
}

// errGrant is every refusal of a grant's signature: which part failed
// is no business of the caller's.
var errGrant = errors.New("the grant is not one this plugin process accepts")

// Verify checks signed under key and returns its grant.
func Verify(key, signed []byte) (*wophostv1.Grant, error) {
	if len(key) != KeyBytes {
		return nil, errGrant
	}
	var sg wophostv1.SignedGrant
	if err := proto.Unmarshal(signed, &sg); err != nil {
		return nil, errGrant
	}
	if !hmac.Equal(sg.GetMac(), mac(key, sg.GetGrant())) {
		return nil, errGrant
	}
	var g wophostv1.Grant
	if err := proto.Unmarshal(sg.GetGrant(), &g); err != nil || g.GetRunId() == "" {
		return nil, errGrant
	}
	return &g, nil
}

func mac(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return m.Sum(nil)
}

// Allows reports whether g lets the node call family (facet "") or one
// of its facets, with the answers the host's least-privilege check gives:
// whole is whether the node declared the family at all, facets the facets
// it declared.
func Allows(g *wophostv1.Grant, family, facet string) bool {
	for _, f := range g.GetFamilies() {
		if f.GetName() != family {
			continue
		}
		if facet == "" {
			return f.GetWhole()
		}
		return slices.Contains(f.GetFacets(), facet)
	}
	return false
}

// CallContext is the call context of a call made on g: the run's, as the
// host would have sent it, with the caller's trace context.
func CallContext(g *wophostv1.Grant, traceparent string) wop.CallContext {
	c := wop.CallContext{
		RunID: g.GetRunId(), NodeID: g.GetNodeId(), TypeID: g.GetTypeId(), Pack: g.GetPack(),
		Caller: wop.PackCaller(g.GetPack()), Depth: int(g.GetDepth()), Traceparent: traceparent,
		IdempotencyKey: g.GetIdempotencyKey(), Token: wop.NewRunToken(g.GetRunToken()),
	}
	if d := g.GetDeadlineUnixNano(); d != 0 {
		c.Deadline = time.Unix(0, d)
	}
	return c
}

// GrantedFamilies are the families of a grant to a caller that declared
// declared, in the order of their first declaration.
func GrantedFamilies(declared []admission.Declaration) []*wophostv1.GrantedFamily {
	var out []*wophostv1.GrantedFamily
	byName := map[string]*wophostv1.GrantedFamily{}
	for _, d := range declared {
		gf := byName[d.Family]
		if gf == nil {
			gf = &wophostv1.GrantedFamily{Name: d.Family}
			byName[d.Family] = gf
			out = append(out, gf)
		}
		if d.Facet == "" {
			gf.Whole = true
		} else {
			gf.Facets = append(gf.Facets, d.Facet)
		}
	}
	return out
}
