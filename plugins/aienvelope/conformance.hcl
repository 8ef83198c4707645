# The conformance file of wophost-aienvelope (docs/conformance.md):
#
#   host conformance --config plugins/aienvelope/conformance.hcl bin/wophost-aienvelope

# No config: the offline local provider answers.
config {}

call "aiEnvelope.generate" {
  input = { envelopeType = "conformance", userMessage = "hello", idempotencyKey = "conformance-1" }
}

# The aiEnvelope contract checks (docs/contract.md §4.1): the await checks
# run in a second process under async_config, and JSON output is asked for
# with json_schema.
family "aiEnvelope" {
  async_config {
    async {
      enabled = true
    }
  }
  json_schema = {
    type       = "object"
    required   = ["greeting"]
    properties = { greeting = { type = "string", minLength = 1 } }
  }
}
