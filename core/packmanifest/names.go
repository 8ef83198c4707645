package packmanifest

import (
	"errors"
	"strconv"
)

// CheckName returns an error saying why name is not a pack name pack.json
// admits, in the words a refused manifest uses, or nil when it is one. A
// tool that writes a manifest checks the name with it before writing.
func CheckName(name string) error {
	return checkValue(manifestShape.props["name"], "name", name)
}

// CheckTypeID is CheckName for a node's typeId.
func CheckTypeID(typeID string) error {
	nodes := manifestShape.props["nodes"]
	return checkValue(nodes.items.props["typeId"], "typeId", typeID)
}

// checkValue checks v against s and returns the first problem as an
// error naming what was checked.
func checkValue(s *shape, what, v string) error {
	var ps problems
	s.check(&ps, "", v)
	if len(ps) == 0 {
		return nil
	}
	return errors.New(what + " " + strconv.Quote(v) + " " + ps[0].Message)
}
