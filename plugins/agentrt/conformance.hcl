# The conformance file of wophost-agentrt (docs/conformance.md):
#
#   host conformance --config plugins/agentrt/conformance.hcl bin/wophost-agentrt

config {
  mailbox_capacity = 3
}

call "agentRuntime.spawn" {
  input = {
    manifest       = { id = "helper", name = "Helper", description = "Helps.", systemPromptRef = "helper@1", toolAllowlist = [] }
    idempotencyKey = "conformance"
  }
}

# The agentRuntime contract checks (docs/contract.md §4.3): the kit answers
# the plugin's callbacks to aiEnvelope and promptLibrary itself. With the
# mailbox capacity the config sets, a full mailbox is checked too.
family "agentRuntime" {
  mailbox_capacity = 3
}
