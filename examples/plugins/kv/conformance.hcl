# The conformance file of the kv example plugin: `host conformance` runs the
# kit against it with this config and these sample calls (docs/conformance.md):
#
#   host conformance --config examples/plugins/kv/conformance.hcl bin/wophost-kv

# The plugin's config block, as a capability block of the host config
# holds it; decoded against the plugin's schema as the host decodes it.
config {
  file            = "kv.db"  # inside the plugin's state directory
  max_value_bytes = 16     # small, so the last call can exceed it
}

# Sample calls. The first must succeed and be safe to repeat: the kit
# varies it for the error and deadline checks.
call "acme.kv.put" {
  input = { key = "k", value = "v" }
}

call "acme.kv.get" {
  input  = { key = "k" }
  expect = { value = "v" }     # the result contains this
}

# The family's vendor codes follow OpenWOP's grammar, org.name.
call "acme.kv.get" {
  input       = { key = "missing" }
  expect_code = "acme.key_not_found"
}

call "acme.kv.put" {
  input       = jsonencode({ key = "big", value = "seventeen bytes!!" })  # JSON text works too
  expect_code = "acme.value_too_large"
}
