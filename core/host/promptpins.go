package host

import (
	"context"
	"sort"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// pinGone reports whether code, the answer to a get of a pinned prompt,
// says the store does not hold that version as pinned: no record of it
// (its name or version unknown), or bytes that are not the pinned ones. A
// store that cannot be read says nothing of the pin.
func pinGone(code string) bool {
	switch code {
	case promptlibrary.CodePromptNotFound, promptlibrary.CodePromptVersionNotFound, promptlibrary.CodePromptDigestMismatch:
		return true
	}
	return false
}

// checkPromptPins resolves every pin of p's prompt lock map through the
// prompt library, as a node's get would, and refuses the pack naming the
// first pin (in name order) the store does not hold: its nodes would fail
// on it at every run. Nothing is checked while promptLibrary is not
// advertised (the pack's peer dependencies decide then), and a pin that
// cannot be checked now (the store unreadable, the plugin restarting) is
// logged and left to the run that asks for it.
func (h *Host) checkPromptPins(ctx context.Context, p *Pack) error {
	lock := p.manifest.Prompts
	if len(lock) == 0 || !h.reg.Has(wop.FamilyPromptLibrary, "") {
		return nil
	}
	names := make([]string, 0, len(lock))
	for name := range lock {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pin := lock[name]
		_, err := h.getPinnedPrompt(ctx, pin, "host (pack load)", "host.packs.load")
		if err == nil {
			continue
		}
		we := wop.AsError(err)
		if !pinGone(we.Code) {
			h.logger.Warn("a prompt pin could not be checked at load; the pack loads and the pin is checked when a node asks for it",
				"pack", p.Name, "prompt", name, "pin", pin, "code", we.Code, "error", we.Message)
			continue
		}
		return wop.Errorf(wop.CodePackValidationFailed, "x-wophost-prompts: %q pins %s, which the prompt library does not hold (%s: %s); publish that version again (host prompts publish) or lock another (host prompts lock)",
			name, pin, we.Code, we.Message).WithDetails(map[string]string{"prompt": name, "pin": pin, "code": we.Code})
	}
	return nil
}
