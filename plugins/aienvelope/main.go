// Command wophost-aienvelope is the capability plugin serving the
// aiEnvelope family: generate (and, when async is on, await) over the
// providers its config declares: a deterministic local rule table,
// OpenAI-compatible servers (OpenAI, Ollama, vLLM, llama.cpp, LM Studio)
// and Anthropic's Messages API.
package main

import "github.com/wophost/wophost/sdk/plugin"

func main() { plugin.Serve(newPlugin()) }
