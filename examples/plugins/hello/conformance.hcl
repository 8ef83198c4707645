# The conformance file of the hello example plugin (docs/conformance.md):
#
#   host conformance --config examples/plugins/hello/conformance.hcl bin/wophost-hello

config {
  greeting = "Hi"
}

call "acme.hello.greet" {
  input  = { name = "Ada" }
  expect = { greeting = "Hi, Ada!" }
}

call "acme.hello.greet" {
  input       = { name = "" }
  expect_code = "validation_error"
}
