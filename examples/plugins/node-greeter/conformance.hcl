# The conformance file of the Node.js example plugin: `host conformance`
# runs the kit against its launcher (docs/conformance.md). Run
# `make node-plugin` first, for its npm packages.
#
#   host conformance --config examples/plugins/node-greeter/conformance.hcl

plugin {
  executable    = "./wophost-node-greeter"
  start_timeout = "30s"   # node loads the proto files at start
}

config {
  greeting = "Hello"
}

# Without acme.kv in the host the method greets the name it is given.
call "acme.greet.greet" {
  input  = { name = "Ada" }
  expect = { greeting = "Hello, Ada!" }
}

call "acme.greet.greet" {
  input       = { name = "" }
  expect_code = "validation_error"
}

call "acme.greet.greetLater" {
  input  = { name = "Ada", afterMs = 0 }
  expect = { greeting = "Hello, Ada!" }
}

call "acme.greet.greetLater" {
  input       = { name = "Ada", afterMs = 60001 }
  expect_code = "validation_error"
}
