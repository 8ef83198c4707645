# The conformance file of wophost-promptlib (docs/conformance.md):
#
#   host conformance --config plugins/promptlib/conformance.hcl bin/wophost-promptlib
#
# The plugin serves a store committed beside this file: the two .prompt
# files of testdata/conformance, published into testdata/conformance/store.
# The checks only read it.

config {
  dir = abspath("testdata/conformance/store")  # absolute: each plugin process has a state directory of its own
}

call "promptLibrary.get" {
  input  = { promptId = "conformance/system@1" }
  expect = { name = "conformance/system", version = "1" }
}

# The promptLibrary contract checks (docs/contract.md §4.2): every prompt
# the store holds, with the exact bytes get must return.
family "promptLibrary" {
  prompt {
    name    = "conformance/system"
    version = "1"
    raw     = file("testdata/conformance/system.prompt")
  }
  prompt {
    name    = "conformance/triage"
    version = "2.1.0"
    raw     = file("testdata/conformance/triage.prompt")
  }
}
