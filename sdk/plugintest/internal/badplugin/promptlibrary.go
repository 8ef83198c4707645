package main

import (
	"encoding/json"
	"strings"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// familyPromptLibrary is BADPLUGIN_FAMILY's value that makes the plugin
// serve promptLibrary, holding the one prompt storedName@storedVersion
// with the text storedRaw. Its rules to break:
//
//   - pl-advertised: get is missing from the described methods.
//   - pl-verbatim: the raw text comes back trimmed.
//   - pl-unpinned: name@latest resolves to the stored version.
//   - pl-missing: an unknown version of a known name is prompt_not_found.
//   - pl-mismatch: a digest pinned beside a version is not checked.
const familyPromptLibrary = "promptLibrary"

// The prompt the promptLibrary mode holds.
const (
	storedName    = "team/greet"
	storedVersion = "1"
	storedRaw     = "---\nname: team/greet\nversion: 1\n---\nHello.  \n"
)

// plDescribeMethods lists the methods the promptLibrary mode describes.
func (s *server) plDescribeMethods() []string {
	if s.breaks("pl-advertised") {
		return []string{"list"}
	}
	return []string{promptlibrary.MethodGet}
}

// plInvoke serves the promptLibrary family.
func (s *server) plInvoke(method string, payload []byte) ([]byte, error) {
	if method != promptlibrary.MethodGet {
		return nil, wop.Errorf(wop.CodeNotFound, "no method %s", method).WithCapability("host." + promptlibrary.Family + "." + method)
	}
	var req promptlibrary.GetRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "get: %v", err)
	}
	id := req.PromptID
	if s.breaks("pl-unpinned") && id == storedName+"@latest" {
		id = storedName + "@" + storedVersion
	}
	pin, err := promptlibrary.ParsePin(id)
	if err != nil {
		return nil, wop.Errorf(promptlibrary.CodePromptUnpinned, "%v", err)
	}
	digest := promptlibrary.DigestOf([]byte(storedRaw))
	switch {
	case pin.Name != storedName:
		return nil, wop.Errorf(promptlibrary.CodePromptNotFound, "no prompt %s", pin.Name)
	case pin.Version != "" && pin.Version != storedVersion, pin.Version == "" && pin.Digest != digest:
		if s.breaks("pl-missing") {
			return nil, wop.Errorf(promptlibrary.CodePromptNotFound, "no prompt %s", id)
		}
		return nil, wop.Errorf(promptlibrary.CodePromptVersionNotFound, "no version %s", id)
	case pin.Digest != "" && pin.Digest != digest && !s.breaks("pl-mismatch"):
		return nil, wop.Errorf(promptlibrary.CodePromptDigestMismatch, "%s has the digest %s", id, digest)
	}
	raw := storedRaw
	if s.breaks("pl-verbatim") {
		raw = strings.TrimSpace(raw) + "\n"
	}
	return json.Marshal(promptlibrary.Prompt{PromptID: req.PromptID, Name: storedName, Version: storedVersion,
		Digest: promptlibrary.DigestOf([]byte(raw)), SystemPrompt: "Hello.", Raw: raw})
}
